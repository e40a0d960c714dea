"""Drives Berth through the unmodified `anyscale` package (0.26.112) for tests/tests/anyscale.rs.

Run with the package's venv, ANYSCALE_HOST and ANYSCALE_CLI_TOKEN set. One command per run;
it prints one JSON document on stdout. A failure of the call under test is printed as
{"error": {"type": ..., "message": ..., "status"?: ..., "body"?: ...}}, so the test can assert
what a user of the SDK would see.

  sdk apply FILE                 anyscale.scheduler.apply_config(SchedulerConfig.from_yaml(FILE))
  sdk apply-dict JSON            anyscale.scheduler.apply_config(dict)
  sdk get [VERSION] [--equals FILE]
                                 anyscale.scheduler.get_config(...); with --equals, whether the
                                 config read back equals SchedulerConfig.from_yaml(FILE)
  sdk list MAX_ITEMS             anyscale.scheduler.list_config_versions(max_items=...)
  sdk rollback VERSION           anyscale.scheduler.rollback_config(...)
  client CALLS_JSON              the generated client (anyscale.client.openapi_client.DefaultApi):
                                 [[operation, {kwargs}], ...] -> a list of results
  example                        the path of the package's own scheduler-config.yaml
"""

import datetime
import json
import os
import sys


def plain(value):
    """A generated model, SDK model or datetime as plain JSON."""
    if hasattr(value, "to_dict"):
        value = value.to_dict()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if hasattr(value, "value") and not isinstance(value, (str, int, float, bool)):
        return value.value  # enums
    return value


def failure(e):
    out = {"type": type(e).__name__, "message": str(e)}
    if hasattr(e, "status"):
        out["status"] = e.status
        body = getattr(e, "body", None)
        try:
            out["body"] = json.loads(body) if body else None
        except ValueError:
            out["body"] = body
    return {"error": out}


def sdk(args):
    import anyscale
    from anyscale.scheduler.models import SchedulerConfig

    op, rest = args[0], args[1:]
    if op == "apply":
        return {"version": anyscale.scheduler.apply_config(SchedulerConfig.from_yaml(rest[0]))}
    if op == "apply-dict":
        return {"version": anyscale.scheduler.apply_config(json.loads(rest[0]))}
    if op == "get":
        equals = None
        if "--equals" in rest:
            i = rest.index("--equals")
            equals = rest[i + 1]
            rest = rest[:i] + rest[i + 2 :]
        version = int(rest[0]) if rest else None
        got = anyscale.scheduler.get_config(version=version)
        out = {
            "version": got.version,
            "is_active": got.is_active,
            "creator_id": got.creator_id,
            "created_at": got.created_at.isoformat(),
            "config": got.config.to_dict(exclude_none=True),
        }
        if equals:
            out["equals_file"] = got.config == SchedulerConfig.from_yaml(equals)
        return out
    if op == "list":
        versions = anyscale.scheduler.list_config_versions(max_items=int(rest[0]))
        return [{"version": v.version, "created_at": v.created_at.isoformat(), "creator_id": v.creator_id} for v in versions]
    if op == "rollback":
        return {"version": anyscale.scheduler.rollback_config(int(rest[0]))}
    raise SystemExit(f"unknown sdk operation {op}")


# The generated client's method for each scheduler operation.
METHODS = {
    "validate": "validate_scheduler_config_api_v2_scheduler_config_validate_post",
    "preview": "preview_scheduler_config_api_v2_scheduler_config_preview_post",
    "overview": "get_overview_api_v2_scheduler_overview_get",
    "queues": "list_queues_api_v2_scheduler_queues_get",
    "queue": "get_queue_api_v2_scheduler_queues_queue_id_get",
    "workloads": "list_queue_workloads_api_v2_scheduler_queues_queue_id_workloads_get",
    "events": "list_scheduler_events_api_v2_scheduler_events_get",
    "top_consumers": "list_top_consumers_api_v2_scheduler_top_consumers_get",
}


def client(calls):
    from anyscale.authenticate import get_auth_api_client
    from anyscale.client.openapi_client.models import (
        PreviewSchedulerConfigRequest,
        ValidateSchedulerConfigRequest,
    )

    api = get_auth_api_client(raise_structured_exception=True).api_client
    results = []
    for op, kwargs in calls:
        kwargs = dict(kwargs)
        args = []
        if op == "validate":
            args = [ValidateSchedulerConfigRequest(**kwargs)]
            kwargs = {}
        elif op == "preview":
            args = [PreviewSchedulerConfigRequest(**kwargs)]
            kwargs = {}
        elif op in ("queue", "workloads"):
            args = [kwargs.pop("queue_id")] + ([kwargs.pop("state")] if op == "workloads" else [])
        for key in ("start_time", "end_time"):
            if key in kwargs:
                kwargs[key] = datetime.datetime.fromisoformat(kwargs[key])
        try:
            answer = getattr(api, METHODS[op])(*args, **kwargs)
            # Validate answers nothing: any 2xx means valid.
            results.append({"ok": plain(answer)})
        except Exception as e:  # noqa: BLE001 - the test asserts on what was raised
            results.append(failure(e))
    return results


def main():
    command, args = sys.argv[1], sys.argv[2:]
    try:
        if command == "sdk":
            out = sdk(args)
        elif command == "client":
            out = client(json.loads(args[0]))
        elif command == "example":
            import anyscale.scheduler

            out = os.path.join(os.path.dirname(anyscale.scheduler.__file__), "examples", "scheduler-config.yaml")
        else:
            raise SystemExit(f"unknown command {command}")
    except Exception as e:  # noqa: BLE001 - the test asserts on what was raised
        out = failure(e)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
