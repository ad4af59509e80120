"""The moments inside a backward pass of one stage's step
(:mod:`actmem.run.moments.timeline`): the loss's backward on the last stage, then
the layer whose backward holds the most, with what it holds then: its
MLP's gradients, its token dispatch and combine (MoE), its softmax
gradient, what recomputation rebuilds, autocast's weight copies, and under
context parallelism the key/value exchange (:mod:`actmem.run.moments.cp_timeline`).
"""

from __future__ import annotations

from .cp_timeline import backward_moments

IN_EARLIER_GROUP = ", in the recomputed group that holds the most"
"""Ends a backward moment's label when an earlier full-recomputation group
than the last sets it (k does not divide the layers)."""


class BackwardMoments:
    """The backward moments of :class:`actmem.run.moments.timeline._Step`, which
    holds the running state they read (``passes``, ``layers``, ``stacks``,
    ``layer``, ``copies``, ``loss``, ``tied``, ``alive``)."""

    def backward(self, chunk: int):
        """(label, bytes) of the moments inside a backward pass through ``chunk``
        (labels with ``{name}``, as :meth:`moments`): the loss's on the last
        stage, then those of the layer whose backward holds the most
        (:meth:`_deciding_layer`)."""
        p = self.passes[chunk]
        if p.last:
            yield ("loss backward of {name}",
                   self.alive(logits_loss=self.loss["backward"] - self.loss["saved"]))
            self.tied_waiting = self.tied   # the output layer's weight gradient
        if self.layers[chunk]:
            yield from self._deciding_layer(chunk)

    def _deciding_layer(self, chunk: int) -> tuple:
        """The moments of the backward of the chunk's layer that holds the
        most: its last layer, or under full recomputation the last layer of
        the group whose recomputation holds the most (Megatron-LM's
        ``TransformerBlock._checkpointed_forward``, ``uniform``: groups of k
        layers from the first, the last one smaller when k does not divide
        the layers; an earlier, whole group rebuilds more layers). Ties go
        to the later layer, differentiated first."""
        n = self.layers[chunk]
        ends = range(n - 1, -1, -1) if self.layer.recompute == "full" else (n - 1,)
        found = [(j, tuple(self._layer_backward(chunk, j))) for j in ends
                 if j == n - 1 or (j + 1) % self.layer.group == 0]
        j, moments = max(found, key=lambda found: max((sum(b) for _, b in found[1]), default=0))
        return moments if j == n - 1 else tuple((label + IN_EARLIER_GROUP, b)
                                                for label, b in moments)

    def _layer_backward(self, chunk: int, j: int):
        """(label, bytes) of the moments while the chunk's layer ``j`` is
        differentiated (the last layer, or under full recomputation the
        last of a group)."""
        p, stack = self.passes[chunk], self.stacks[chunk]
        layer, group = stack[j], self._group_size(chunk, j)
        # by now the loss and the output layer are differentiated: their
        # saved tensors (the softmax, the output layer's inputs) are freed
        kept = self._layer_bytes(chunk) + p.output
        if layer.dispatch and layer.recompute == "full":   # its forward again, with grad
            yield ("backward of {name}: the last layer's token dispatch, recomputing",
                   self.alive(self._backward_layers(chunk, layer.to_dispatch_recomputed, j)
                              - kept, -p.logits_loss, transient=layer.dispatch,
                              weights=self._backward_copies(chunk, group, mlp=True)))
        if layer.dispatch_backward:   # the last layer is an MoE layer
            rows = layer.kept if layer.recompute == "selective" else layer.full
            yield ("backward of {name}: the last layer's MoE combine",
                   self.alive(self._backward_layers(chunk, rows, j) - kept, -p.logits_loss,
                              transient=layer.dispatch_backward,
                              weights=self._backward_copies(chunk, group, mlp=True)))
        if layer.mlp_gradients:
            mlp = self._backward_layers(chunk, layer.full, j) if layer.recompute == "full" \
                else self._layer_bytes(chunk)
            yield ("backward of {name}: the last layer's MLP",
                   self.alive(mlp - kept, -p.logits_loss, transient=layer.mlp_gradients,
                              weights=self._backward_copies(chunk, group, mlp=True)))
        yield from backward_moments(self, chunk, kept, j, group)  # context parallelism
        this = layer.to_softmax if layer.scores else layer.full
        extra = self._backward_layers(chunk, this, j) - kept
        if extra or layer.scores:
            label = "softmax gradient" if layer.scores else "last layer"
            label += ", recomputing" if layer.recompute != "none" else ""
            yield ("backward of {name}: " + label,
                   self.alive(extra, -p.logits_loss, transient=layer.softmax_gradients,
                              weights=self._backward_copies(chunk, group)))

    def _group_size(self, chunk: int, j: int) -> int:
        """Layers of the full-recomputation group whose last layer is ``j``
        (1 without full recomputation: only that layer)."""
        if self.layer.recompute != "full":
            return 1
        return j % self.layer.group + 1

    def _backward_copies(self, chunk: int, group: int, mlp: bool = False) -> int:
        """Autocast's weight copies alive while a layer of the chunk is
        differentiated (at its MLP, or at its softmax), less those the pass
        keeps: the output layer's copy is freed by then, and at the softmax
        the layer's projection and MLP copies (their backward is done);
        under full recomputation the recomputed group's ``group`` layers cast
        their weights again."""
        p, copies, layer = self.passes[chunk], self.copies, self.layer
        freed = (copies.output if p.last else 0) + (
            0 if mlp else copies.weights - copies.qkv_weights)
        if layer.recompute != "full":
            return -freed
        return group * copies.weights - freed

    def _backward_layers(self, chunk: int, this: int, j: int) -> int:
        """Bytes the pass's layers hold while the chunk's layer ``j`` is
        differentiated: the earlier layers' kept bytes (full recomputation:
        the earlier groups' checkpoints and the recomputed layers of ``j``'s
        group before it; the later layers are differentiated and freed), and
        ``this``, layer ``j``'s rows still alive (recomputed where needed).
        A group's checkpoint is the input of its first recomputed layer, so
        it is counted once."""
        stack = self.stacks[chunk]
        if j == len(stack) - 1:
            return self._other_sums[chunk] + this
        start = j - self._group_size(chunk, j) + 1   # j's group's first layer
        return self._sum_other_layers(stack[:j + 1], start) + this

    def _sum_other_layers(self, stack, start: int | None = None) -> int:
        """Bytes of the layers of ``stack`` before its last one while that
        one is differentiated (``start``: the first layer of its group under
        full recomputation; default, the group of the stack's last layer)."""
        group = self.layer.group
        if self.layer.recompute != "full":
            return sum(m.kept for m in stack[:-1])
        if start is None:
            start = (len(stack) - 1) // group * group   # the last group's first layer
        return sum(m.checkpoint for m in stack[:start:group]) + sum(m.full for m in stack[start:-1])
