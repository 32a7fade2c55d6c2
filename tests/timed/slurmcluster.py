"""A real one-node Slurm cluster for the tests: munged, slurmctld and slurmd started as root from Debian's
`munge` and `slurm-wlm`, with every key, socket, state, spool, log and pid file in one temporary directory,
non-default ports, and plugins that need no cgroups (so it runs in a container). Stopped, always, by stop().
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

# A job in one of these states has ended for good (COMPLETING has not: its processes may still run).
FINISHED_JOB_STATES = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL"}
    | {"DEADLINE"}
)
DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "scancel", "squeue", "scontrol", "sinfo")


def why_no_cluster() -> str | None:
    """None when this machine can run the test cluster, else the reason to skip."""
    if os.geteuid() != 0:
        return "the test Slurm cluster needs root (munged and slurmd run as root; ./scripts/test.sh as root)"
    missing = [name for name in DAEMONS if shutil.which(name) is None]
    if missing:
        names = ", ".join(missing)
        return f"Slurm or munge is not installed (missing {names}; ./scripts/test.sh installs them as root)"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class SlurmCluster:
    root: Path
    node: str = field(default_factory=lambda: socket.gethostname().split(".")[0])
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """The client commands' environment (no SLURM_* of an outer job leaks in)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        return {**env, "SLURM_CONF": str(self.conf)}

    def write_config(self, kill_wait_s: int) -> None:
        for name in ("state", "spool", "log", "run"):
            (self.root / name).mkdir(parents=True, exist_ok=True)
        root = self.root
        memory_mb = max(1024, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20 // 2)
        self.conf.write_text(
            f"""ClusterName=workbenchtest
SlurmctldHost={self.node}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={root}/run/munge.socket
CredType=cred/munge
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmctldDebug=debug
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
KillWait={kill_wait_s}
NodeName={self.node} CPUs={os.cpu_count() or 1} RealMemory={memory_mb} State=UNKNOWN
PartitionName=cpu Nodes={self.node} Default=YES MaxTime=INFINITE State=UP
""",
            encoding="utf-8",
        )

    def _daemon(self, *argv: str) -> None:
        log = open(self.root / "log" / f"{Path(argv[0]).name}.out", "wb")  # noqa: SIM115 (kept by Popen)
        self.processes.append(
            subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        )
        log.close()

    def start(self, kill_wait_s: int = 60, timeout_s: float = 60.0) -> None:
        self.write_config(kill_wait_s)
        run = self.root / "run"
        subprocess.run(["mungekey", "-c", "-k", str(run / "munge.key")], check=True, capture_output=True)
        self._daemon(
            "munged",
            "--foreground",
            "--force",
            f"--socket={run}/munge.socket",
            f"--key-file={run}/munge.key",
            f"--pid-file={run}/munged.pid",
            f"--seed-file={run}/munged.seed",
            f"--log-file={run}/munged.log",
        )
        self._wait_for(lambda: (run / "munge.socket").exists(), "munged's socket", timeout_s)
        self._daemon("slurmctld", "-D", "-f", str(self.conf))
        self._daemon("slurmd", "-D", "-f", str(self.conf))
        self._wait_for(self._node_idle, "the node to be idle in sinfo", timeout_s)

    def _node_idle(self) -> bool:
        done = self.client("sinfo", "-h", "-N", "-o", "%T", check=False)
        return done.returncode == 0 and done.stdout.strip().startswith("idle")

    def _wait_for(self, ready, what: str, timeout_s: float) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ready():
                return
            for process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"{process.args[0]} exited ({process.returncode}): {self.logs()}")
            time.sleep(0.5)
        raise RuntimeError(f"timed out waiting for {what}: {self.logs()}")

    def client(self, *argv: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv, capture_output=True, text=True, env=self.env, check=check, timeout=timeout
        )

    def wait_for_job(self, job_id: str, timeout_s: float) -> int:
        """Wait until every task of the job has finished and return its exit code as `sbatch --wait` would
        (the highest, 1 for a task killed by a signal). `sbatch --wait` itself looks 2, 10 and 42 s after
        the submission: a job done in 15 s would keep the test waiting 27 s more."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            shown = self.client("scontrol", "show", "job", "-o", job_id, check=False).stdout
            jobs = [dict(re.findall(r"(\w+)=(\S*)", line)) for line in shown.splitlines() if line.strip()]
            if jobs and all(job.get("JobState") in FINISHED_JOB_STATES for job in jobs):
                codes = [job["ExitCode"].split(":") for job in jobs]
                return max(int(status) if signal == "0" else 1 for status, signal in codes)
            time.sleep(0.5)
        raise AssertionError(f"job {job_id} did not finish in {timeout_s:g} s\n{self.logs()}")

    def job_gone(self, job_id: str) -> bool:
        done = self.client("squeue", "-h", "-j", job_id, check=False)
        return done.returncode != 0 or not done.stdout.strip()

    def logs(self, lines: int = 15) -> str:
        tails = []
        for log in sorted((self.root / "log").glob("*")):
            with contextlib.suppress(OSError):
                tail = log.read_text(errors="replace").splitlines()[-lines:]
                tails.append(f"== {log.name}\n" + "\n".join(tail))
        return "\n".join(tails)

    def stop(self) -> None:
        """Cancel whatever still runs, stop the daemons (TERM, then KILL), whatever state they are in."""
        with contextlib.suppress(Exception):
            self.client("scancel", "--user=root", check=False, timeout=10)
        for process in reversed(self.processes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in reversed(self.processes):
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)
        self.processes.clear()
