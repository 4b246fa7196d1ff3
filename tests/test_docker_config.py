"""docker/: the compose file and the Dockerfile describe the tested topology.

No Docker engine or compose plugin runs on this machine, so `docker compose config` cannot run
here; instead the file is validated against the Compose Specification's JSON Schema (as bundled
with docker-compose 1.29.2, `tests/data/compose_spec.json`), and every `TUNEHUB_*` variable and
command it uses is checked against what tunehub reads and offers."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import jsonschema
import pytest
import yaml

from service.entry.cli import build_parser
from service.entry.host_cli import serve_refusal
from service.shared.settings import ENV_PREFIX, Settings

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker" / "compose.yaml"
PYPROJECT = (ROOT / "pyproject.toml").read_text()
# What the operator must export before `docker compose up` (see the compose file's header).
OPERATOR_ENV = {
    "POSTGRES_PASSWORD": "pg-secret-1",
    "RABBITMQ_PASSWORD": "mq-secret-2",
    "REDIS_PASSWORD": "redis-secret-3",
}
VARIABLE = re.compile(r"\$\{(\w+)(?:(:?[-?])([^}]*))?\}")


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's variable substitution: ``${X}``, ``${X:-default}``, ``${X:?error}`` (an
    unset or empty X is an error: compose refuses to start)."""

    def one(match: re.Match[str]) -> str:
        name, op, arg = match.group(1), match.group(2) or "", match.group(3) or ""
        if env.get(name):
            return env[name]
        if op.endswith("?"):
            raise KeyError(f"{name}: {arg}")
        return arg if op.endswith("-") else ""

    return VARIABLE.sub(one, value)


def _compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_compose_file_follows_the_compose_specification() -> None:
    schema = json.loads((Path(__file__).parent / "data" / "compose_spec.json").read_text())
    validator = jsonschema.Draft201909Validator(schema)
    document = _compose()
    assert [e.message for e in validator.iter_errors(document)] == []
    assert {"api", "worker", "postgres", "rabbitmq", "redis"} <= set(document["services"])
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
            monkeypatch.setenv(name, interpolate(str(value), OPERATOR_ENV))
        settings = Settings.from_env()
        assert settings.store_url.startswith("postgresql+psycopg://") and "@postgres:" in (
            settings.store_url
        )
        assert settings.broker.startswith("amqp://") and "@rabbitmq:" in settings.broker
        assert settings.artifact_store == "database"
        assert settings.redis_url and "redis-secret-3@redis:6379" in settings.redis_url
        command = service["command"]
        assert command[0] == "tunehub"
        parser.parse_args(command[1:])  # the CLI accepts the command (SystemExit otherwise)
        for dependency in ("postgres", "rabbitmq"):
            assert service["depends_on"][dependency]["condition"] == "service_healthy"
    assert services["api"]["command"][1:3] == ["serve", "--workers"]
    assert services["worker"]["command"][1] == "worker"
    # No volume between API and worker: artifacts are in the database, limits in Redis.
    assert "volumes" not in services["api"] and "volumes" not in services["worker"]
    assert services["api"]["depends_on"]["redis"]["condition"] == "service_healthy"


def test_dockerfile_builds_the_wheel_installs_it_and_runs_the_cli() -> None:
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    # Every package the wheel ships (pyproject's wheel target), and the build hook, go into the
    # build stage; the image installs the wheel that stage built, nothing else of the source.
    wheel = re.search(r"\[tool\.hatch\.build\.targets\.wheel\]\npackages = \[(.*)\]", PYPROJECT)
    assert wheel is not None
    packages = [name.strip(' "') for name in wheel.group(1).split(",")]
    assert {"service", "tuning", "schedules_db", "schedule_reads"} == set(packages)
    for package in packages:
        assert f"COPY {package} ./{package}" in dockerfile
    assert "COPY pyproject.toml README.md hatch_build.py ./" in dockerfile
    assert "RUN pip wheel --no-cache-dir --no-deps -w /dist ." in dockerfile
    final = dockerfile.split("\nFROM ")[-1]
    assert (
        "COPY --from=wheel /dist /dist" in final
        and "pip install --no-cache-dir /dist/*.whl" in final
    )
    assert "COPY service" not in final
    cmd = next(line for line in dockerfile.splitlines() if line.startswith("CMD "))
    argv = json.loads(cmd[4:])
    assert argv[0] == "tunehub"
    build_parser().parse_args(argv[1:])
    assert shlex.join(argv)


def test_compose_runs_with_auth_and_operator_set_passwords_only(monkeypatch) -> None:  # noqa: ANN001
    """Auth on; every password comes from a variable compose requires (``${X:?...}``): no
    literal password, no guest/guest, no trust authentication."""
    text = COMPOSE.read_text()
    services = _compose()["services"]
    settings_text = "\n".join(line.split("#")[0] for line in text.splitlines())  # no comments
    assert "guest" not in settings_text and "trust" not in settings_text
    api_env = services["api"]["environment"]
    for name, value in api_env.items():
        monkeypatch.setenv(name, interpolate(str(value), OPERATOR_ENV))
    settings = Settings.from_env()
    assert settings.auth is True and settings.anonymous_reads is False
    host = services["api"]["command"][services["api"]["command"].index("--host") + 1]
    assert host == "0.0.0.0" and "--insecure" not in services["api"]["command"]
    assert serve_refusal(host, settings, insecure=False) is None
    # The URLs' passwords, the database's and the broker's, are required variables.
    required = re.compile(r"\$\{(\w+):\?[^}]+\}")
    for role in ("api", "worker"):
        env = services[role]["environment"]
        for name in ("TUNEHUB_DATABASE_URL", "TUNEHUB_BROKER_URL", "TUNEHUB_REDIS_URL"):
            password = re.match(r"\w+(?:\+\w+)?://[^:/]*:(.*)@", env[name]).group(1)
            assert required.fullmatch(password), (role, name)
    postgres = services["postgres"]["environment"]
    assert required.fullmatch(postgres["POSTGRES_PASSWORD"])
    assert "POSTGRES_HOST_AUTH_METHOD" not in postgres
    assert set(postgres["POSTGRES_INITDB_ARGS"].split()) == {
        "--auth-local=scram-sha-256",
        "--auth-host=scram-sha-256",
    }
    rabbitmq = services["rabbitmq"]["environment"]
    assert rabbitmq["RABBITMQ_DEFAULT_USER"] != "guest"
    assert required.fullmatch(rabbitmq["RABBITMQ_DEFAULT_PASS"])
    # Without the operator's variables nothing resolves (compose refuses to start).
    for variable in OPERATOR_ENV:
        partial = {k: v for k, v in OPERATOR_ENV.items() if k != variable}
        with pytest.raises(KeyError, match=variable):
            interpolate(text, partial)
    assert "pg-secret-1" in interpolate(api_env["TUNEHUB_DATABASE_URL"], OPERATOR_ENV)
