import os
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


def test_a_subcommand_run_imports_its_own_modules_not_the_others() -> None:
    """``kubeflux serve`` imports neither the simulator's command, the served cluster's nor the harness (0.1-0.2 s of
    serve's start); ``kubeflux --help`` still lists every subcommand."""
    probe = (
        "import sys; from kubeflux import cli; sys.argv = ['kubeflux', 'serve', '--help']\n"
        "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
        "others = {'kubeflux.sim.command', 'kubeflux.sim.apiserver.command', 'kubeflux.controlplane.harness'}\n"
        "print(sorted(others & set(sys.modules)), 'kubeflux.kube.command' in sys.modules)"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert loaded.stdout.splitlines()[-1] == "[] True"
    command = [sys.executable, "-m", "kubeflux.cli", "--help"]
    listed = subprocess.run(command, capture_output=True, text=True, check=True)
    for name in ("simulate", "sweep", "serve", "queue", "cluster", "kube", "demo", "query", "version"):
        assert f" {name} " in listed.stdout, name


def test_kubeflux_runs_numpy_on_one_blas_thread_unless_the_user_chose() -> None:
    """kubeflux does no linear algebra; NumPy's OpenBLAS would start a thread per core at import that spins ~0.1 s
    of CPU (serve's start, each simulation and sweep worker). A user's own OPENBLAS_NUM_THREADS is kept."""
    probe = (
        "import os, kubeflux.cli, numpy\nprint(os.environ['OPENBLAS_NUM_THREADS'], len(os.listdir('/proc/self/task')))"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    ours = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env)
    assert ours.stdout.split() == ["1", "1"]  # the setting, and no thread beside the main one
    theirs = {**env, "OPENBLAS_NUM_THREADS": "2"}
    kept = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=theirs)
    assert kept.stdout.split()[0] == "2"
