"""Fitting a figure to the width it is drawn at: one idea, in modules by what they do.

``text``: how wide and how many lines a label is (estimated from the font, no browser); ``reading``: what a figure
holds (its axes, tick and category labels, legend), read without changing it; ``width``: the rules that fit a figure
to a width (ticks, titles, legend, cell text); ``slide``: a figure fitted to a slide (``fit_for_slide``); ``page``:
a figure at the page's own size, margins reserved up front (``fit_for_page``, ``reserve_margins``)."""
