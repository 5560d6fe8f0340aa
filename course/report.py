"""The course report: one page with the C1–C8 verdicts and a key plot per lab, from the
learner's result files (:mod:`course.results`).

    python -m course.report [FOLDER] [--out DIR]

reads ``FOLDER/results/*.json`` (default: the current folder) and writes ``report.md`` and
``report.html`` into ``DIR`` (default: ``FOLDER``), figures embedded as base64 PNG so that each
file stands alone. :func:`build` is what the capstone's last cell calls. A lab without a
result file renders as "not measured yet"; nothing here starts Ray or measures anything.
"""

from __future__ import annotations

import argparse
import base64
import datetime as _dt
import html
import io
import re
import sys
from pathlib import Path
from typing import Callable

from course import results, verdicts

TITLES = {
    "00_measure": "Lab 00 — the image kernel, by batch size",
    "01_actor_scaling": "Lab 01 — one blocking actor call",
    "02_restart_recovery": "Lab 02 — actor restart after SIGKILL",
    "03_quotas": "Lab 03 — throughput with quotas / without",
    "04_data_affinity": "Lab 04 — bytes copied between nodes per run",
    "05_capstone": "Lab 05 — plan vs pipeline vs hand-written pool",
}


def _figure():
    """A matplotlib Figure on the Agg canvas: no pyplot, no global state, no display needed."""
    from matplotlib.figure import Figure

    return Figure(figsize=(6, 3.2), layout="constrained")


def _png(fig) -> str:
    """The figure as base64 PNG text."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _numbers(d: dict, key: str):
    v = d.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _by_size(d: dict, key: str) -> list[tuple[int, float]]:
    """A {str(size): rate} dict as sorted (size, rate) pairs, skipping what is not a number."""
    got = d.get(key)
    if not isinstance(got, dict):
        return []
    pairs = []
    for k, v in got.items():
        try:
            pairs.append((int(k), float(v)))
        except (TypeError, ValueError):
            continue
    return sorted(pairs)


def plot_00(d: dict):
    """Images/s of the image kernel against batch size (lab 00)."""
    pairs = _by_size(d, "kernel_images_per_s")
    if not pairs:
        return None
    fig = _figure()
    ax = fig.subplots()
    ax.plot([p[0] for p in pairs], [p[1] for p in pairs], marker="o")
    ax.axhline(verdicts.C8_TARGET / verdicts.C8_GPUS, color="tab:red", linestyle="--",
               label="C8 needs 10,000 / 200 images/s per GPU")
    px = d.get("image_px")
    ax.set(xscale="log", yscale="log", xlabel="batch size (images per call)", ylabel="throughput (images/s)",
           title=f"image kernel, {d.get('backend', '?')}" + (f", {px}×{px} px" if px else ""))
    ax.set_xticks([p[0] for p in pairs], [str(p[0]) for p in pairs])
    ax.legend(fontsize=8)
    return fig


def plot_01(d: dict):
    """Trivial-call latency (p50, p99, fitted overhead) next to C2's claimed tail (lab 01)."""
    bars = [(label, _numbers(d, key)) for label, key in
            (("p50 call", "call_p50_s"), ("p99 call", "call_p99_s"), ("fitted overhead", "call_overhead_s"))]
    bars = [(label, v) for label, v in bars if v is not None]
    if not bars:
        return None
    fig = _figure()
    ax = fig.subplots()
    ax.bar([b[0] for b in bars], [b[1] * 1e3 for b in bars])
    ax.axhline(verdicts.C2_RAY_TAIL_S * 1e3, color="tab:red", linestyle="--", label="C2 claim: Ray tail < 20 ms")
    ax.set(yscale="log", ylabel="time per actor call (ms)", xlabel="measurement (one machine)",
           title="one blocking Ray actor call")
    ax.legend(fontsize=8)
    return fig


def plot_02(d: dict):
    """Restart p50 and p95 next to C3's claimed 30 ms (lab 02)."""
    bars = [(label, _numbers(d, key)) for label, key in (("p50", "restart_p50_s"), ("p95", "restart_p95_s"))]
    bars = [(label, v) for label, v in bars if v is not None]
    if not bars:
        return None
    fig = _figure()
    ax = fig.subplots()
    ax.bar([b[0] for b in bars], [b[1] for b in bars])
    ax.axhline(verdicts.C3_RAY_S, color="tab:red", linestyle="--", label="C3 claim: 30 ms")
    ax.set(yscale="log", ylabel="SIGKILL → answered again (s)", xlabel="percentile of the measured restarts",
           title="Ray actor restart, measured")
    ax.legend(fontsize=8)
    return fig


def _bars(d: dict, series, scale: float = 1.0):
    """(figure, axes) with one bar per ``(label, key)`` of ``series`` that ``d`` has, values
    divided by ``scale``; None when it has none."""
    bars = [(label, _numbers(d, key)) for label, key in series]
    bars = [(label, v) for label, v in bars if v is not None]
    if not bars:
        return None
    fig = _figure()
    ax = fig.subplots()
    ax.bar([b[0] for b in bars], [b[1] / scale for b in bars])
    return fig, ax


def plot_03(d: dict):
    """Saturated throughput with quotas / without, per mechanism, next to C5's 15 % (lab 03)."""
    drawn = _bars(d, (("custom resources", "quota_throughput_ratio"),
                      ("placement groups", "quota_throughput_ratio_groups")))
    if drawn is None:
        return None
    fig, ax = drawn
    ax.axhline(1 - verdicts.C5_OVERHEAD, color="tab:red", linestyle="--", label="C5 claim: 15 % overhead")
    ax.set(ylabel="throughput with quotas / without (×)", xlabel="quota mechanism (16 logical GPUs)",
           title="what the quota cost the saturated pool", ylim=(0, 1.3))
    ax.legend(fontsize=8)
    return fig


def plot_04(d: dict):
    """Bytes copied between nodes per run: naive actors, tasks, pinned actors (lab 04)."""
    drawn = _bars(d, (("(a) naive actors", "cross_node_bytes_naive"), ("(b) tasks", "cross_node_bytes_tasks"),
                      ("(c) pinned actors", "cross_node_bytes_aware")), scale=2**20)
    if drawn is None:
        return None
    fig, ax = drawn
    total = _numbers(d, "input_bytes")
    if total:
        ax.axhline(total / 2**20, color="gray", linestyle=":", label="input per run")
        ax.legend(fontsize=8)
    ax.set(ylabel="bytes copied between nodes (MiB per run)", xlabel="placement of the same job",
           title="data movement (emulated cluster)")
    return fig


def plot_05(d: dict):
    """The plan's predicted images/s against the pipeline and the hand-written pool (lab 05)."""
    drawn = _bars(d, (("plan (predicted)", "predicted_images_per_s"), ("Ray Data pipeline", "pipeline_images_per_s"),
                      ("hand-written pool", "pool_images_per_s")))
    if drawn is None:
        return None
    fig, ax = drawn
    ax.set(ylabel="throughput (images/s)", xlabel="predicted and measured on this machine",
           title="capstone: plan vs reality")
    return fig


PLOTS: dict[str, Callable[[dict], object]] = {
    "00_measure": plot_00, "01_actor_scaling": plot_01, "02_restart_recovery": plot_02,
    "03_quotas": plot_03, "04_data_affinity": plot_04, "05_capstone": plot_05}


def figures(all_numbers: dict) -> dict[str, str | None]:
    """{lab: base64 PNG, or None when the lab has no numbers to plot}."""
    out = {}
    for lab, plot in PLOTS.items():
        fig = plot(all_numbers.get(lab) or {})
        out[lab] = _png(fig) if fig is not None else None
    return out


def _fingerprints(folder) -> dict[str, str]:
    return {lab: results.record(lab, folder).get("fingerprint", "") for lab in results.LABS}


def render_markdown(rows, pngs: dict, prints: dict, when: str) -> str:
    """The page as Markdown: the verdict table, then one section per lab."""
    out = ["# Ray vs Kubernetes for GPU workloads — your measured verdicts", "",
           f"Built {when} from your result files (`results/<lab>.json`).", "",
           "## C1–C8", "", verdicts.markdown(rows), "", "## Your numbers, lab by lab", ""]
    for lab, title in TITLES.items():
        out += [f"### {title}", ""]
        if pngs.get(lab):
            out += [f"Machine: `{prints.get(lab) or 'unknown'}`", "",
                    f"![{title}](data:image/png;base64,{pngs[lab]})", ""]
        else:
            out += [f"not measured yet — run lab {lab[:2]}", ""]
    return "\n".join(out)


def _inline(text: str) -> str:
    """Escape text for HTML, then render the Markdown the rows use: **bold**, *italic*, `code`."""
    t = html.escape(str(text))
    t = re.sub(r"`([^`]+)`", r"<code>\1</code>", t)
    t = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", t)
    return re.sub(r"\*([^*]+)\*", r"<em>\1</em>", t)


def render_html(rows, pngs: dict, prints: dict, when: str) -> str:
    """The same page as standalone HTML."""
    head = ("<tr><th>claim</th><th>your number</th><th>what the docs say</th><th>verdict</th>"
            "<th>source</th></tr>")
    body = "\n".join(
        f"<tr><td><strong>{r.claim}</strong> “{_inline(r.text)}”</td><td>{_inline(r.yours)}</td>"
        f"<td>{_inline(r.docs)}</td><td><strong>{_inline(r.verdict)}</strong></td><td>{_inline(r.source)}</td></tr>"
        for r in rows)
    labs = []
    for lab, title in TITLES.items():
        if pngs.get(lab):
            labs.append(f"<h3>{html.escape(title)}</h3><p>Machine: <code>{html.escape(prints.get(lab) or 'unknown')}"
                        f"</code></p><img alt=\"{html.escape(title)}\" src=\"data:image/png;base64,{pngs[lab]}\">")
        else:
            labs.append(f"<h3>{html.escape(title)}</h3><p>not measured yet — run lab {lab[:2]}</p>")
    style = ("body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
             "table{border-collapse:collapse;font-size:0.9em}td,th{border:1px solid #ccc;padding:4px 6px;"
             "vertical-align:top;text-align:left}img{max-width:100%}")
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>Your measured verdicts</title><style>{style}</style></head><body>\n"
            f"<h1>Ray vs Kubernetes for GPU workloads — your measured verdicts</h1>\n"
            f"<p>Built {html.escape(when)} from your result files (<code>results/&lt;lab&gt;.json</code>).</p>\n"
            f"<h2>C1–C8</h2>\n<table>\n{head}\n{body}\n</table>\n<h2>Your numbers, lab by lab</h2>\n"
            + "\n".join(labs) + "\n</body></html>\n")


def build(folder=".", out=None) -> tuple[Path, Path]:
    """Write ``report.md`` and ``report.html`` into ``out`` (default: ``folder``) from the result
    files under ``folder``; return their paths."""
    numbers = results.load_all(folder)
    rows = verdicts.table(numbers)
    pngs, prints = figures(numbers), _fingerprints(folder)
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    dest = Path(out if out is not None else folder)
    dest.mkdir(parents=True, exist_ok=True)
    md, page = dest / "report.md", dest / "report.html"
    md.write_text(render_markdown(rows, pngs, prints, when), encoding="utf-8")
    page.write_text(render_html(rows, pngs, prints, when), encoding="utf-8")
    return md, page


def main(argv=None) -> int:
    """``python -m course.report [FOLDER] [--out DIR]``."""
    parser = argparse.ArgumentParser(prog="python -m course.report", description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", default=".", help="the folder holding results/ (default: .)")
    parser.add_argument("--out", default=None, help="where to write report.md and report.html (default: FOLDER)")
    args = parser.parse_args(argv)
    md, page = build(args.folder, args.out)
    measured = [lab for lab, n in results.load_all(args.folder).items() if n]
    print(f"wrote {md} and {page} ({len(measured)} of {len(results.LABS)} labs measured)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
