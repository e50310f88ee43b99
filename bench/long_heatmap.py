"""The long heatmap on SmolLM2-135M-Instruct at 4,096 tokens of the bundled haystack text (issue 41 item 3): one
head computed, pooled and drawn (figure JSON size), a 256-token zoom (only its query rows computed), a head switch
within a layer whose heads are pooled already, and the thumbnails of every head; with the machine's load."""

from __future__ import annotations

import os
import time

TOKENS = 4096
PIXELS = 628  # an 820-px page column less the figure's margins at device pixel ratio 1 (ui.attention_page.head_pixels)


def _timed(run):
    start = time.perf_counter()
    value = run()
    seconds = round(time.perf_counter() - start, 3)
    print(f"{seconds:8.3f} s  (load {os.getloadavg()[0]:.1f})", flush=True)  # as it goes: a run may be cut short
    return value, seconds


def main() -> dict:
    from core.attention_heads.long_attention import pooled_head, thumbnails, zoom
    from core.attention_heads.retrieval import bundled_haystack
    from core.model.inference import analyze
    from core.model.models import load_model
    from core.model.tokens import token_labels
    from viz import long_heatmap as lh

    model = load_model("SmolLM2-135M-Instruct")
    text = model.tokenizer.decode(model.tokenizer(bundled_haystack())["input_ids"][:TOKENS])
    load = [round(os.getloadavg()[0], 1)]
    # analyze keeps a long text's queries and keys (weights on demand); its time is the analysis's, not the drawing's
    analysis, analysis_s = _timed(lambda: analyze(model, text, max_tokens=TOKENS))
    labels = token_labels(analysis)
    layer, head = 10, 0
    pooled, head_s = _timed(lambda: pooled_head(model, analysis, layer, head, PIXELS))
    fig, figure_s = _timed(lambda: lh.pooled_head_figure(pooled["max"], title="SmolLM2 · layer 10, head 0",
                                                         colorscale="Cividis", region=(range(0, 256), range(0, 256))))
    head_json = len(fig.to_json())
    zoomed, zoom_s = _timed(lambda: zoom(model, analysis, layer, head, range(2048, 2304), range(1900, 2156), labels))
    zoom_fig, zoom_figure_s = _timed(lambda: lh.zoom_figure(zoomed, title="zoom", colorscale="Cividis"))
    zoom_json = len(zoom_fig.to_json())
    others = {}
    _, layer_s = _timed(lambda: others.update({h: pooled_head(model, analysis, layer, h, PIXELS)
                                               for h in range(1, model.num_heads)}))
    _, switch_s = _timed(lambda: lh.pooled_head_figure(others[1]["max"], title="SmolLM2 · layer 10, head 1",
                                                       colorscale="Cividis", region=(range(0, 256), range(0, 256))))
    tile = lh.thumbnail_pixels(820 - 90, 1450, model.num_heads, model.num_layers, 1.0)  # ui.attention_page.thumbs_pixels
    thumbs, thumbs_s = _timed(lambda: thumbnails(model, analysis, tuple(range(model.num_layers)), "max", tile))
    thumbs_fig, thumbs_figure_s = _timed(lambda: lh.thumbnails_figure(thumbs, title="every head", colorscale="Cividis"))
    load.append(round(os.getloadavg()[0], 1))
    figures = {
        "tokens": analysis.num_tokens, "pixels": len(pooled["max"].row_starts), "tokens_per_pixel": pooled["max"].per_pixel,
        "analysis_s": analysis_s,
        "one_head_compute_and_pool_s": head_s, "one_head_figure_s": figure_s, "one_head_figure_json_kb": round(head_json / 1e3, 1),
        "zoom_256_compute_s": zoom_s, "zoom_256_figure_s": zoom_figure_s, "zoom_256_figure_json_kb": round(zoom_json / 1e3, 1),
        "layer_other_heads_s": layer_s, "head_switch_figure_from_pooled_s": switch_s,
        "thumbnail_pixels": tile, "all_heads_thumbnails_s": thumbs_s, "all_heads_thumbnails_figure_s": thumbs_figure_s,
        "all_heads_thumbnails_json_kb": round(len(thumbs_fig.to_json()) / 1e3, 1),
        "load_average_1min": load, "cores": os.cpu_count(), "torch_threads": __import__("torch").get_num_threads(),
    }
    print(figures)
    return figures
