"""Renderers: the verdict as rich text (`terminal`), JSON (`jsonout`) and a picture of the merged tree
(`html`: self-contained HTML with inline SVG, or SVG alone). They take a Verdict and add no analysis."""
