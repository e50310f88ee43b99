"""The explorer's computation, no Streamlit, one sub-package per question (lowest first; each imports only from those
before it and ``core.errors``): ``core.model``, ``core.maths``, ``core.outputs``, ``core.attention_heads``,
``core.representations``, ``core.causal``, ``core.teaching``. See docs/architecture.md.
"""
