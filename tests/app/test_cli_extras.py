"""A command whose optional part is not installed says which extra brings it, in one line.

The lazy commands' stand-in used to read the caught exception in a callback that ran after the
`except` block had ended, where Python has already unbound the name: a NameError instead of the
promised message (ruff's F821 found it)."""
from __future__ import annotations

from click.testing import CliRunner

from jaxmem.app import cli
from jaxmem.core.errors import MissingExtra, missing_extra


def test_a_lazy_command_that_cannot_import_names_the_missing_extra(monkeypatch):
    monkeypatch.setitem(cli.LazyGroup.lazy, "verify", "jaxmem.app.no_such_module:command")
    real_import = cli.importlib.import_module

    def fake_import(name, *a, **kw):
        if name == "jaxmem.app.no_such_module":
            raise ModuleNotFoundError("No module named 'jax'", name="jax")
        return real_import(name, *a, **kw)

    monkeypatch.setattr(cli.importlib, "import_module", fake_import)
    result = CliRunner().invoke(cli.main, ["verify", "buffer-donation", "--json"])
    assert result.exit_code == 2, result.output
    assert "NameError" not in result.output and "Traceback" not in result.output
    assert "pip install 'jaxmem[verify]'" in result.output
    assert "`jaxmem verify` needs 'jax'" in result.output


def test_an_unknown_import_failure_is_still_one_clear_line(monkeypatch):
    command = cli.unavailable("web", ImportError("libfoo.so: cannot open shared object file"))
    result = CliRunner().invoke(command, [])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[0] == ("error: `jaxmem web` is unavailable here: "
                                                     "libfoo.so: cannot open shared object file")


def test_every_optional_module_maps_to_a_declared_extra():
    import tomllib
    from pathlib import Path

    declared = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    extras = set(declared["project"]["optional-dependencies"])
    from jaxmem.core.errors import EXTRAS

    assert set(EXTRAS) <= extras
    err = missing_extra(ModuleNotFoundError("x", name="chromadb.api"))
    assert isinstance(err, MissingExtra) and "jaxmem[chat]" in err.hint
    assert missing_extra(ModuleNotFoundError("x", name="not_optional")) is None
