"""Validates every AG-UI event our host emitted against the Python ag-ui-protocol models."""
import json
import sys

from pydantic import TypeAdapter
from ag_ui.core import Event

adapter = TypeAdapter(Event)
n = bad = 0
for line in open(sys.argv[1]):
    line = line.strip()
    if not line:
        continue
    n += 1
    obj = json.loads(line)
    try:
        ev = adapter.validate_python(obj)
        # What Python writes back must be the same JSON (no field lost or changed).
        back = json.loads(ev.model_dump_json(by_alias=True, exclude_none=False))
        back = {k: v for k, v in back.items() if v is not None}
        if back != obj:
            bad += 1
            print(f"FAIL: python re-encodes {obj} as {back}")
    except Exception as e:  # noqa: BLE001
        bad += 1
        print(f"FAIL: ag-ui-protocol rejects {obj}: {e}")
print(f"ok: {n - bad}/{n} events validate against ag-ui-protocol (Python)")
sys.exit(1 if bad or n == 0 else 0)
