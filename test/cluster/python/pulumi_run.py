"""Runs one Pulumi operation on a Python program file with the real Pulumi CLI and engine (local
file backend), then prints the result as one JSON line.

    python pulumi_run.py '<json request>'

The program file is the user's, unchanged (the README's Python program). It runs in this process
through the Automation API's inline-program host, which serves the engine the language runtime the
`pulumi-language-python` plugin would (that plugin is not published as a Go module version the
machines here can fetch): the engine, the state, the providers and every resource operation are
the real ones.
"""

import json
import runpy
import sys

from pulumi import automation as auto


def main(req):
    def program():
        runpy.run_path(req["program"], run_name="__main__")

    stack = auto.create_or_select_stack(
        stack_name=req["stack"],
        project_name=req["project"],
        program=program,
        opts=auto.LocalWorkspaceOptions(
            work_dir=req["workDir"],
            project_settings=auto.ProjectSettings(
                name=req["project"],
                runtime="python",
                backend=auto.ProjectBackend(url="file://" + req["backendDir"]),
            ),
        ),
    )
    for key, entry in req.get("config", {}).items():
        stack.set_config(key, auto.ConfigValue(value=entry["value"], secret=entry.get("secret", False)))
    out = []
    if req["op"] == "destroy":
        result = stack.destroy(on_output=out.append)
        outputs = {}
    else:
        result = stack.up(on_output=out.append)
        outputs = {k: v.value for k, v in result.outputs.items()}
    changes = dict(result.summary.resource_changes or {})
    print(json.dumps({"op": req["op"], "changes": changes, "outputs": outputs, "stdout": "\n".join(out)}))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
