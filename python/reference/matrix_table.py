"""Prints a torchconform report's matrix: check x recipe, the verdict of each cell (Python recipes)."""
import json, sys
d = json.load(open(sys.argv[1]))
only_python = "--all" not in sys.argv
cells = [c for c in d["cells"] if (not only_python) or c.get("language") == "python" or c["recipe"] in ("reference",)]
recipes, checks = [], []
for c in cells:
    if c["recipe"] not in recipes: recipes.append(c["recipe"])
    if c["check"] not in checks: checks.append(c["check"])
grid = {(c["check"], c["recipe"]): c for c in cells}
def short(c):
    if c is None: return "-"
    v = c["verdict"]
    mark = {"ok": "ok", "skipped": "skip", "missed": "MISSED", "false_alarm": "FALSE_ALARM", "error": "ERROR", "fail": "FAIL"}.get(v, v)
    target = c.get("expected") == "fail"
    return ("*" if target else "") + mark + ("" if v == "skipped" else "(" + c.get("outcome", "?") + ")")
w = max(len(ch) for ch in checks) + 1
print("recipes:", ", ".join(f"R{i}={r}" for i, r in enumerate(recipes)))
print("| check | " + " | ".join(recipes) + " |")
print("|---|" + "---|" * len(recipes))
for ch in checks:
    print(f"| {ch} | " + " | ".join(short(grid.get((ch, r))) for r in recipes) + " |")
print("\n* = a targeted cell (the variant must be caught there)\n")
for c in cells:
    if c["verdict"] not in ("ok", "skipped") or "--evidence" in sys.argv:
        print(f"[{c['verdict']}/{c.get('outcome')}] {c['check']} x {c['recipe']}: {c.get('evidence','')[:600]}\n")
if "--skips" in sys.argv:
    for c in cells:
        if c["verdict"] == "skipped": print(f"[skip] {c['check']} x {c['recipe']}: {c.get('evidence','')[:300]}")
print(json.dumps(d["summary"]))
