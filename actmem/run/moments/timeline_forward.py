"""The moments inside a forward pass of a stage's step: the mixin of
:class:`actmem.run.moments.timeline._Step` that names them (the data loader's
mask, context parallelism's exchange, the last MoE layer's token dispatch,
the attention scores beside the softmax, the loss), as
:mod:`actmem.run.moments.timeline_backward` does for the backward."""

from __future__ import annotations

from .cp_timeline import forward_moments


class ForwardMoments:
    """Forward-pass moments of :class:`actmem.run.moments.timeline._Step`,
    which holds the passes, stacks, copies and what is alive."""

    def forward(self, chunk: int):
        """(label, bytes) of the moments inside a forward pass through ``chunk``
        (labels with ``{name}``, as :meth:`moments`)."""
        p, copies, stack = self.passes[chunk], self.copies, self.stacks[chunk]
        layer = stack[-1] if stack else self.layer
        mask = self.mask if p.loads_data else 0
        cast = self.layers[chunk] * (copies.weights + copies.biases)  # cached till the end
        yield from forward_moments(self, chunk, mask, cast)  # context parallelism
        moe = [j for j, m in enumerate(stack) if m.dispatch]
        if moe:   # the last MoE layer's token dispatch, after its routed experts
            yield ("forward of {name}: the last MoE layer's token dispatch",
                   self.alive(p.embedding + self._forward_layers_before(chunk, moe[-1])
                              + stack[moe[-1]].to_dispatch,
                              transient=mask + stack[moe[-1]].dispatch, weights=cast))
        if layer.scores and self.layers[chunk]:
            earlier = self._forward_layers_before(chunk, len(stack) - 1)
            yield ("forward of {name}: attention scores beside the softmax",
                   self.alive(p.embedding + earlier + layer.to_softmax,
                              transient=mask + (0 if self.scores_in_workspace
                                                else layer.scores),
                              weights=cast - copies.weights - copies.biases
                              + copies.qkv_weights + copies.qkv_biases))
        if p.last:
            yield ("loss of {name}",
                   self.alive(self._kept[chunk][0], self.loss["forward"], transient=mask,
                              weights=cast + copies.output))
        elif mask:
            yield ("end of the forward of {name}, its batch still loaded",
                   self.alive(*self._kept[chunk][:2], transient=mask, weights=cast))

    def _forward_layers_before(self, chunk: int, j: int) -> int:
        """Bytes the chunk's layers before its layer ``j`` hold while layer
        ``j`` runs its forward (full recomputation: one checkpoint per group
        that starts before ``j``; layer j's own input is counted with it)."""
        stack = self.stacks[chunk][:j]
        if self.layer.recompute != "full":
            return sum(m.kept for m in stack)
        return sum(m.checkpoint for m in stack[::self.layer.group])
