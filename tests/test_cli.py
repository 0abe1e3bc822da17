import subprocess
import sys

from kubeflux import __version__


def test_version_command_prints_the_package_version() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kubeflux.cli", "version"], capture_output=True, text=True, check=True
    )
    assert result.stdout.splitlines()[0] == __version__
