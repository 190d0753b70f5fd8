"""The steppers in a real JupyterLab, driven by headless Chromium: a click on "next ▶" moves one step.

JupyterLab is started as tests/library/view/test_browser.py starts it. The notebook builds a small seeded
model and shows a DecoderStepper (on a sentence padded with two <pad> positions) and a BeamStepper; a last
cell writes the package's own computation to expected.json: greedy_decode's word and attention row of every
step, and the first two records of beam_steps (each continuation's log P, and which are kept or finish).
The test runs all cells and reads what each stepper shows from the page: the decoder stepper's step number,
chosen word, every weight of its table and which columns are masked; the beam stepper's continuations, their
log P and status. It checks them against expected.json at step 0, clicks each stepper's "next ▶", and checks
step 1 the same way. Screenshots before and after the clicks land under artifacts/test_steppers_browser/
(git-ignored).

Needs Debian's Chromium at /usr/bin/chromium and Playwright's Python package.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import chromium
import nbformat
import pytest

pytestmark = [pytest.mark.slow, chromium.needs_chromium]

ROOT = Path(__file__).resolve().parents[3]
ARTIFACTS = chromium.ARTIFACTS / "test_steppers_browser"
WIDGET_TIMEOUT_MS = 180_000  # kernel start, the course's imports and a tiny model on a busy machine
PAD = 2

NOTEBOOK_CELLS = [
    "import json\n"
    "import torch\n"
    "from attn_course.data.tasks import build_vocabs, toy_translation\n"
    "from attn_course.models.decoding import beam_steps, greedy_decode\n"
    "from attn_course.models.seq2seq import build_model\n"
    "from attn_course.view.steppers import BeamStepper, DecoderStepper\n"
    "torch.manual_seed(0)\n"
    "examples = toy_translation(6, min_len=4, max_len=6, seed=0)\n"
    "src_vocab, tgt_vocab = build_vocabs(examples)\n"
    'model = build_model("bahdanau", len(src_vocab), len(tgt_vocab), embed_size=8, encoder_hiddens=8)',
    f"stepper = DecoderStepper(model, examples[0].src, src_vocab, tgt_vocab, pad={PAD}, max_len=6)\nstepper",
    "beams = BeamStepper(model, examples[0].src, src_vocab, tgt_vocab, beam_size=2, max_len=6)\nbeams",
    # The package's own computation, written where the test reads it: greedy_decode on the same padded input.
    "ids = src_vocab[examples[0].src] + [src_vocab.eos]\n"
    f"src = torch.tensor([ids + [src_vocab.pad] * {PAD}])\n"
    "(hyp,) = greedy_decode(model, src, torch.tensor([len(ids)]), bos=tgt_vocab.bos, eos=tgt_vocab.eos,"
    " max_len=6)\n"
    "words = tgt_vocab.to_tokens(hyp.tokens + [tgt_vocab.eos] * hyp.finished)\n"
    f"rows = [row + [0.0] * {PAD} for row in hyp.attention.tolist()]\n"
    "steps = beam_steps(model, src[:, :len(ids)], torch.tensor([len(ids)]), bos=tgt_vocab.bos,"
    " eos=tgt_vocab.eos, beam_size=2, max_len=6)\n"
    "beam = [{'scores': s.candidate_scores[0].tolist(), 'kept': s.kept[0].tolist(),"
    " 'finishing': s.finishing[0].tolist()} for s, _ in zip(steps, range(2))]\n"
    'with open("expected.json.part", "w") as f:\n'
    '    json.dump({"words": words, "weights": rows, "valid_len": len(ids), "beam": beam}, f)\n'
    'import os; os.replace("expected.json.part", "expected.json")',
]


def _shown(page) -> dict:
    """What the decoder stepper shows: its step (readout, view), the chosen word, the weights, the masks."""
    return page.evaluate(
        """() => {
            const view = document.querySelector('.attn-stepper:not(.attn-beam-stepper)');
            const readout = view.closest('.jp-OutputArea-output').querySelector('.attn-readout');
            const cells = [...view.querySelectorAll('td.attn-weight')];
            return {
                readout: readout.getAttribute('data-step'),
                step: view.getAttribute('data-step'),
                word: view.querySelector('.attn-word').textContent,
                weights: cells.map(c => parseFloat(c.getAttribute('data-weight'))),
                texts: cells.map(c => c.textContent),
                masked: [...view.querySelectorAll('td.attn-score')].map(c => c.getAttribute('data-masked')),
            };
        }"""
    )


def _shown_beam(page) -> dict:
    """What the beam stepper shows: its step, and each continuation's log P and status, best first."""
    return page.evaluate(
        """() => {
            const view = document.querySelector('.attn-beam-stepper');
            const readout = view.closest('.jp-OutputArea-output').querySelector('.attn-readout');
            const rows = [...view.querySelectorAll('tr.attn-candidate')];
            return {
                readout: readout.getAttribute('data-step'),
                step: view.getAttribute('data-step'),
                scores: rows.map(r => parseFloat(r.querySelector('[data-score]').getAttribute('data-score'))),
                statuses: rows.map(r => r.getAttribute('data-status')),
            };
        }"""
    )


def _assert_step(shown: dict, expected: dict, t: int) -> None:
    assert shown["readout"] == shown["step"] == str(t)
    assert shown["word"] == expected["words"][t]
    assert shown["weights"] == pytest.approx(expected["weights"][t], abs=1e-6)
    assert shown["texts"] == [f"{w:.2f}" for w in expected["weights"][t]]
    assert shown["masked"] == ["0"] * expected["valid_len"] + ["1"] * PAD


def _assert_beam_step(shown: dict, expected: dict, t: int) -> None:
    step = expected["beam"][t]
    statuses = ["finished" if finishing else "kept" if c in step["kept"] else "pruned"
                for c, finishing in enumerate(step["finishing"])]
    assert shown["readout"] == shown["step"] == str(t)
    assert shown["scores"] == pytest.approx(step["scores"], abs=1e-6)
    assert shown["statuses"] == statuses


def _wait_for_file(path: Path, timeout_s: float) -> dict:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"the notebook did not write {path.name} within {timeout_s:.0f} s")
        time.sleep(0.2)
    return json.loads(path.read_text())


def test_next_moves_each_stepper_one_step_showing_the_packages_values(tmp_path, capsys):
    timings, start = {}, time.perf_counter()
    root, home = tmp_path / "root", tmp_path / "home"
    root.mkdir()
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in NOTEBOOK_CELLS])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, root / "stepper.ipynb")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    lab = chromium.Lab(root, home)
    try:
        lab.wait_until_ready()
        timings["server start"] = time.perf_counter() - start
        with chromium.sync_playwright() as playwright:
            browser = chromium.launch(playwright)
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            try:
                page.goto(lab.url("stepper.ipynb"))
                # Run All only once the kernel is up: JupyterLab drops a run request sent while it starts.
                chromium.run_all(page, WIDGET_TIMEOUT_MS)
                page.locator(".attn-beam-stepper[data-step='0']").wait_for(timeout=WIDGET_TIMEOUT_MS)
                expected = _wait_for_file(root / "expected.json", WIDGET_TIMEOUT_MS / 1000)
                timings["run all cells"] = time.perf_counter() - start
                before, beam_before = _shown(page), _shown_beam(page)
                _assert_step(before, expected, 0)
                _assert_beam_step(beam_before, expected, 0)
                output = page.locator(".jp-OutputArea-output", has=page.locator(".attn-stepper"))
                decoder_output = output.filter(has_not=page.locator(".attn-beam-stepper")).first
                beam_output = output.filter(has=page.locator(".attn-beam-stepper")).first
                assert decoder_output.locator("button", has_text="◀ back").is_disabled()
                decoder_output.screenshot(path=str(ARTIFACTS / "decoder_stepper_step0.png"))
                beam_output.screenshot(path=str(ARTIFACTS / "beam_stepper_step0.png"))

                decoder_output.locator("button", has_text="next ▶").click()
                beam_output.locator("button", has_text="next ▶").click()
                page.locator(".attn-stepper:not(.attn-beam-stepper)[data-step='1']").wait_for(timeout=60_000)
                page.locator(".attn-beam-stepper[data-step='1']").wait_for(timeout=60_000)
                timings["click next"] = time.perf_counter() - start
                after, beam_after = _shown(page), _shown_beam(page)
                _assert_step(after, expected, 1)
                _assert_beam_step(beam_after, expected, 1)
                assert after["weights"] != before["weights"] and beam_after["scores"] != beam_before["scores"]
                assert decoder_output.locator("button", has_text="◀ back").is_enabled()
                decoder_output.screenshot(path=str(ARTIFACTS / "decoder_stepper_step1.png"))
                beam_output.screenshot(path=str(ARTIFACTS / "beam_stepper_step1.png"))
            except BaseException:
                failure = ARTIFACTS / "stepper_failure.png"
                page.screenshot(path=str(failure), full_page=True)
                with capsys.disabled():
                    print(f"\n[browser test] failed; screenshot: {failure}\n{lab.log_tail()}")
                raise
            finally:
                browser.close()
    finally:
        lab.stop()
    timings["total"] = time.perf_counter() - start
    with capsys.disabled():
        steps = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in timings.items())
        print(f"\n[browser test] screenshots in {ARTIFACTS}\n[browser test] cumulative: {steps}")
