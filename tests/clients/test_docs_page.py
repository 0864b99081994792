"""docs/CLIENTS.md: every command of the page, run in the order written, in one folder holding the tiny
models the page names, by the runner of every page (tests/python/doc_blocks.py). A command that fails,
or a page whose commands name something the folder does not hold, fails the test: the page says what
works because this test ran it."""
import sys

from conftest import REPO
from tiny_models import bin_folder, ddpm_folder, llama_folder, meta_original_folder

sys.path.insert(0, str(REPO / "tests" / "python"))
import doc_blocks  # noqa: E402  (tests/python is not this suite's folder)

PAGE = REPO / "docs" / "CLIENTS.md"


def test_the_page_has_commands_of_both_kinds():
    kinds = [b.lang for b in doc_blocks.blocks(PAGE)]
    assert "sh" in kinds and "python" in kinds, kinds
    assert doc_blocks.problems_of(PAGE) == []


def test_every_command_of_the_page_runs(tmp_path, cli):
    llama_folder(tmp_path / "tiny-llama")
    bin_folder(tmp_path / "tiny-llama", tmp_path / "tiny-llama-bin")
    from transformers import LlamaForCausalLM

    meta_original_folder(tmp_path / "tiny-llama-original", LlamaForCausalLM.from_pretrained(tmp_path / "tiny-llama"), shards=2)
    ddpm_folder(tmp_path / "pipeline")
    ran = doc_blocks.run_page(PAGE, tmp_path)
    assert len(ran) == len(doc_blocks.blocks(PAGE)), "every block of the page runs"
