"""The HTML report in a real headless Chromium (Debian's ``chromium`` and ``chromium-driver``, driven by
Selenium): it renders without console errors, each bar segment's height on screen is its bytes from
``diff --format json`` over the device's capacity, the rank grids answer hover, and a screenshot is made.

Skips when no Chromium / chromedriver is found (``SHARDCHECK_CHROMIUM`` / ``SHARDCHECK_CHROMEDRIVER``
override the paths); CI (.ci/run) installs both. ``SHARDCHECK_SCREENSHOTS=DIR`` keeps the screenshots.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from shardcheck.cli import main

CASES = Path(__file__).parent / "data" / "cases"
PAIR = [str(CASES / "qwen3_235b_256k_before.sh"), str(CASES / "qwen3_235b_256k_after.sh")]
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1600,1200",
)


def _binary(env: str, *names: str) -> str | None:
    given = os.environ.get(env)
    if given:
        return given if Path(given).is_file() else None
    for name in names:
        found = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").is_file() else None)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the test extra has it)")
    chromium = _binary("SHARDCHECK_CHROMIUM", "chromium", "chromium-browser")
    driver_path = _binary("SHARDCHECK_CHROMEDRIVER", "chromedriver")
    if chromium is None or driver_path is None:
        pytest.skip("no chromium / chromedriver found (apt-get install chromium chromium-driver; .ci/run does)")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = chromium
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    os.environ.setdefault("SE_AVOID_STATS", "true")
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    yield driver
    driver.quit()


def _write(argv: list[str], capsys) -> str:
    main(argv)
    return capsys.readouterr().out


def _expected_bars(memory: dict | None) -> list[tuple[str, dict[str, int]]]:
    if not memory:
        return []
    return [(f"stage {s['label']}", s["bytes"]) for s in memory["stages"]] + (
        [(f"rollout {memory['rollout']['engine']}", memory["rollout"]["bytes"])] if memory["rollout"] else []
    )


MEASURE = """
return Array.from(document.querySelectorAll('svg.memory')).map(function(svg){
  var base = svg.getBoundingClientRect().height / svg.viewBox.baseVal.height;
  return {id: svg.id, capacity: Number(svg.dataset.capacityBytes), capacityPx: Number(svg.dataset.capacityPx),
          scale: base, capLineY: svg.querySelector('line.capacity').getBoundingClientRect().top,
          baseLineY: svg.querySelector('line.capacity').nextElementSibling.nextElementSibling
                        .getBoundingClientRect().top,
          bars: Array.from(svg.querySelectorAll('g.bar')).map(function(g){
            return {label: g.dataset.label, segs: Array.from(g.querySelectorAll('rect.seg')).map(function(r){
              return {term: r.dataset.term, bytes: Number(r.dataset.bytes), px: r.getBoundingClientRect().height};
            })};
          })};
});
"""


def _check_page(browser, path: Path, sides: list[dict | None], shots: Path) -> None:
    browser.get(path.as_uri())
    logs = browser.get_log("browser")
    assert not [entry for entry in logs if entry["level"] in ("SEVERE", "WARNING")], logs
    charts = browser.execute_script(MEASURE)
    assert len(charts) == len([m for m in sides if m]), [c["id"] for c in charts]
    for chart, memory in zip(charts, [m for m in sides if m]):
        assert chart["capacity"] == memory["capacity_bytes"]
        # the dashed capacity line sits capacity-px above the base line, on screen
        assert abs((chart["baseLineY"] - chart["capLineY"]) - chart["capacityPx"] * chart["scale"]) < 1.0
        expected = _expected_bars(memory)
        assert [b["label"] for b in chart["bars"]] == [label for label, _ in expected]
        for bar, (label, terms) in zip(chart["bars"], expected):
            drawn = {s["term"]: s for s in bar["segs"]}
            assert set(drawn) == {t for t, b in terms.items() if b and b > 0}, label
            for term, seg in drawn.items():
                assert seg["bytes"] == terms[term]  # the figure the JSON has
                px = terms[term] / memory["capacity_bytes"] * chart["capacityPx"] * chart["scale"]
                assert abs(seg["px"] - px) < 0.75, (label, term, seg["px"], px)
    # hovering a rank dims the ranks of other groups (the page's script runs)
    dimmed = browser.execute_script("""
        var svg = document.querySelector('svg.ranks'); var cell = svg.querySelector('rect.rank');
        cell.dispatchEvent(new MouseEvent('mouseover', {bubbles: true}));
        var n = svg.querySelectorAll('rect.rank.dim').length, same = svg.querySelectorAll(
            'rect.rank[data-group="' + cell.dataset.group + '"]').length;
        return [n, same, svg.querySelectorAll('rect.rank').length];""")
    assert dimmed[0] == dimmed[2] - dimmed[1] > 0, dimmed
    assert not [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    height = browser.execute_script("return document.body.scrollHeight")
    browser.set_window_size(1600, min(max(height, 600), 8000))
    shot = shots / (path.stem + ".png")
    assert browser.save_screenshot(str(shot))
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    keep = os.environ.get("SHARDCHECK_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)


def test_diff_html_in_chromium(browser, tmp_path, capsys):
    page = tmp_path / "diff.html"
    main(["diff", "--format", "html", "-o", str(page), *PAIR])
    doc = json.loads(_write(["diff", "--format", "json", *PAIR], capsys))
    [d] = doc["diffs"]

    def memory(side: str) -> dict:
        dev = d["memory"]["device"][side]
        return {
            "capacity_bytes": dev["capacity_bytes"],
            "stages": d["memory"][side],
            "rollout": d["memory"]["rollout"][side],
        }

    html = page.read_text()
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in html
    assert "<link" not in html and "src=" not in html  # nothing to fetch: one self-contained file
    _check_page(browser, page, [memory("before"), memory("after")], tmp_path)
    text = browser.find_element("tag name", "body").text
    assert "EP groups now stay inside a node" in text and "before: " in text and "after: " in text


def test_report_html_in_chromium(browser, tmp_path, capsys):
    page = tmp_path / "report.html"
    script = str(CASES / "qwen3_235b_256k_etp_unset.sh")
    assert main(["report", script, PAIR[1], "-o", str(page)]) == 1
    capsys.readouterr()
    sides = []
    for p in (script, PAIR[1]):
        mem = json.loads(_write(["memory", "--format", "json", p], capsys))["results"][0]
        train = mem["train"]
        ro = mem["rollout"]
        stages = [{"label": _label(s["ranks"]), "bytes": _terms(s["bytes"])} for s in train["stages"]] if train else []
        rollout = None
        if ro:
            rollout = {
                "engine": ro["engine"],
                "bytes": {
                    "weights": ro["weights_bytes"],
                    "kv_cache": max(0, ro["kv_budget_bytes"]),
                    "reserve": ro["reserve_bytes"],
                    "training_resident": ro["training_resident_bytes"],
                },
            }
        sides.append({"capacity_bytes": mem["device"]["memory_bytes"], "stages": stages, "rollout": rollout})
    _check_page(browser, page, sides, tmp_path)
    body = browser.find_element("tag name", "body").text
    assert "MCORE-PS-EXPERT-FOLD" in body and "expert_tensor_parallel_size=1" in body
    assert "will not start" in body


def _label(ranks: list[int]) -> str:
    if len(ranks) == 1:
        return str(ranks[0])
    return f"{ranks[0]}–{ranks[-1]}" if ranks == list(range(ranks[0], ranks[-1] + 1)) else ",".join(map(str, ranks))


def _terms(nbytes: dict[str, int]) -> dict[str, int]:
    """A stage's terms as `memory --format json` gives them; the device total over what torch allocates is
    drawn as "overhead" (when the estimate has an ``allocated`` figure below ``total``)."""
    terms = {k: v for k, v in nbytes.items() if k not in ("total", "allocated", "optimizer_host")}
    allocated = nbytes.get("allocated", sum(terms.values()))
    if nbytes["total"] > allocated:
        terms["overhead"] = nbytes["total"] - allocated
    return terms
