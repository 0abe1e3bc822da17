import subprocess
import sys

from kubeflux import __version__


def test_version_command_prints_the_package_version() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kubeflux.cli", "version"], capture_output=True, text=True, check=True
    )
    assert result.stdout.splitlines()[0] == __version__


def test_starting_kubeflux_loads_no_cel_library_until_a_selector_is_read() -> None:
    """The CEL library's package loads its interactive shell (prompt_toolkit, ~0.3 s): every command's start and
    serve's first bind paid it, for DeviceClass and claim selectors that most clusters never send."""
    probe = "import sys, kubeflux.cli, kubeflux.kube.serve; print(sorted({'cel', 'prompt_toolkit'} & set(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"
