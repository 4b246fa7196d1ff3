"""docker/: the compose file and the Dockerfile describe the tested topology.

No Docker engine or compose plugin runs on this machine, so `docker compose config` cannot run
here; instead the file is validated against the Compose Specification's JSON Schema (as bundled
with docker-compose 1.29.2, `tests/data/compose_spec.json`), and every `TUNEHUB_*` variable and
command it uses is checked against what tunehub reads and offers."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import jsonschema
import yaml

from service.cli import build_parser
from service.settings import ENV_PREFIX, Settings

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker" / "compose.yaml"


def _compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_compose_file_follows_the_compose_specification() -> None:
    schema = json.loads((Path(__file__).parent / "data" / "compose_spec.json").read_text())
    validator = jsonschema.Draft201909Validator(schema)
    document = _compose()
    assert [e.message for e in validator.iter_errors(document)] == []
    assert {"api", "worker", "postgres", "rabbitmq"} <= set(document["services"])
    # The schema does catch mistakes (a misspelt key, a wrong type).
    broken = _compose()
    broken["services"]["worker"]["restrat"] = "always"
    broken["services"]["api"]["ports"] = 8000
    assert len(list(validator.iter_errors(broken))) >= 2


def test_compose_services_use_real_settings_and_commands(monkeypatch) -> None:  # noqa: ANN001
    services = _compose()["services"]
    known = {ENV_PREFIX + name.upper() for name in Settings.__dataclass_fields__}
    parser = build_parser()
    for role in ("api", "worker"):
        service = services[role]
        env = service["environment"]
        assert set(env) <= known, set(env) - known
        for name, value in env.items():  # tunehub reads them as the compose file means them
            monkeypatch.setenv(name, str(value))
        settings = Settings.from_env()
        assert settings.store_url.startswith("postgresql+psycopg://") and "@postgres:" in (
            settings.store_url
        )
        assert settings.broker.startswith("amqp://") and "@rabbitmq:" in settings.broker
        assert str(settings.artifacts) == "/data/artifacts"
        command = service["command"]
        assert command[0] == "tunehub"
        parser.parse_args(command[1:])  # the CLI accepts the command (SystemExit otherwise)
        for dependency in ("postgres", "rabbitmq"):
            assert service["depends_on"][dependency]["condition"] == "service_healthy"
    assert services["api"]["command"][1:3] == ["serve", "--workers"]
    assert services["worker"]["command"][1] == "worker"
    # API and workers share the artifact volume the API serves downloads from.
    assert services["api"]["volumes"] == services["worker"]["volumes"]


def test_dockerfile_installs_the_packages_and_runs_the_cli() -> None:
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    for package in ("service", "tuning", "schedules_db"):
        assert f"COPY {package} ./{package}" in dockerfile
    cmd = next(line for line in dockerfile.splitlines() if line.startswith("CMD "))
    argv = json.loads(cmd[4:])
    assert argv[0] == "tunehub"
    build_parser().parse_args(argv[1:])
    assert shlex.join(argv)
