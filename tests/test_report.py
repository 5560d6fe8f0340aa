"""course.report: the course's one-page report from result files (no Ray, no kernel)."""

from __future__ import annotations

import base64
import re
import subprocess
import sys

from course import report, results
from test_verdicts import FULL

PNG = re.compile(r"data:image/png;base64,([A-Za-z0-9+/=]+)")


def _save_all(folder, numbers=FULL):
    for lab, n in numbers.items():
        results.save(lab, n, folder)


def test_the_report_renders_from_result_files(tmp_path):
    _save_all(tmp_path)
    md, page = report.build(tmp_path)
    assert (md, page) == (tmp_path / "report.md", tmp_path / "report.html")
    text, html = md.read_text(), page.read_text()
    for claim in ("C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8"):
        assert f"**{claim}**" in text and f"<strong>{claim}</strong>" in html
    assert "<table>" in html and "<th>your number</th>" in html and "<th>verdict</th>" in html
    assert "not reproduced — p50 = 47× the claim" in html
    pngs = PNG.findall(html)
    assert len(pngs) == 5  # labs 00-04 have numbers, the capstone not yet
    assert all(base64.b64decode(p).startswith(b"\x89PNG") for p in pngs)
    assert len(PNG.findall(text)) == 5
    assert "not measured yet — run lab 05" in html and "not measured yet — run lab 05" in text
    assert "numpy-cpu-2c-abcdef" in html  # lab 00's fingerprint names the machine


def test_no_result_files_render_as_not_measured(tmp_path):
    md, page = report.build(tmp_path / "nothing-here", out=tmp_path / "out")
    html = page.read_text()
    assert md.parent == tmp_path / "out" and not PNG.search(html)
    assert html.count("not measured yet — run lab") == 6 + 8  # a section per lab, a row per claim
    assert not (tmp_path / "nothing-here" / "results").exists()


def test_partial_and_odd_numbers_do_not_break_the_plots(tmp_path):
    results.save("00_measure", {"kernel_images_per_s": {"16": 5.0, "x": "fast", "64": None}}, tmp_path)
    results.save("05_capstone", {"pipeline_images_per_s": 300.0}, tmp_path)
    html = report.build(tmp_path)[1].read_text()
    assert len(PNG.findall(html)) == 2


def test_html_escapes_what_it_shows():
    row = report.verdicts.Row("C9", "a <b> & c", "`x`", "*Page*", "**v**", "s")
    html = report.render_html([row], {}, {}, "now")
    assert "a &lt;b&gt; &amp; c" in html and "<code>x</code>" in html and "<em>Page</em>" in html


def test_the_command_line(tmp_path):
    _save_all(tmp_path, {"02_restart_recovery": FULL["02_restart_recovery"]})
    out = subprocess.run([sys.executable, "-m", "course.report", str(tmp_path), "--out", str(tmp_path / "o")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "1 of 6 labs measured" in out.stdout
    assert (tmp_path / "o" / "report.html").exists() and (tmp_path / "o" / "report.md").exists()


def test_importing_the_report_has_no_side_effects(tmp_path):
    code = "import course.report, course.results, course.verdicts, sys; print('matplotlib.pyplot' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert out.stdout.strip() == "False" and not list(tmp_path.iterdir())
