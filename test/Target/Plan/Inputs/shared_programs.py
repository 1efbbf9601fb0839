"""Checks that a plan's templates and entries give back its per-device
programs exactly.

  shared_programs.py DTFM-TRANSLATE DTFM-RUN PLANNED.mlir WORKDIR

Exports PLANNED.mlir twice -- as dtfm writes plans (each stage's program
once, as a template, and each device's entry) and with --whole-programs
(every device's program in full, as the exporter built it) -- then reads
the shared plan back (--import-plan: templates and entries expanded) and
writes that whole again. The two whole plans must be identical, byte for
byte in text form; the two binary plans must simulate alike. Prints the
counts and the verdicts for FileCheck.
"""
import json
import os
import re
import subprocess
import sys


def run(*cmd):
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        sys.exit(f"shared_programs.py: {' '.join(cmd)} failed:\n{done.stderr}")
    return done.stdout


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    translate, dtfm_run, planned, work = sys.argv[1:]
    os.makedirs(work, exist_ok=True)
    path = lambda name: os.path.join(work, name)
    run(translate, "--export-plan", planned, "-o", path("shared.pb"))
    run(translate, "--export-plan", "--plan-text", planned,
        "-o", path("shared.txtpb"))
    run(translate, "--export-plan", "--whole-programs", planned,
        "-o", path("whole.pb"))
    run(translate, "--export-plan", "--whole-programs", "--plan-text",
        planned, "-o", path("whole.txtpb"))
    run(translate, "--import-plan", path("shared.pb"),
        "-o", path("back.mlir"))
    run(translate, "--export-plan", "--whole-programs", "--plan-text",
        path("back.mlir"), "-o", path("expanded.txtpb"))
    with open(path("shared.txtpb")) as f:
        shared = f.read()
    with open(path("whole.txtpb")) as f:
        whole = f.read()
    with open(path("expanded.txtpb")) as f:
        expanded = f.read()
    devices = len(re.findall(r"^programs \{", whole, re.M))
    templates = len(re.findall(r"^templates \{", shared, re.M))
    entries = len(re.findall(r"^programs \{", shared, re.M))
    no_templates = not re.search(r"^templates \{", whole, re.M)
    print(f"devices {devices}, templates {templates}, entries {entries}, "
          f"whole plan without templates: {no_templates}")
    print(f"expanded programs equal the whole ones: {expanded == whole}")
    if expanded != whole:
        a, b = whole.splitlines(), expanded.splitlines()
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                print(f"  first difference at line {i + 1}: {x!r} vs {y!r}")
                break
    sims = []
    for name in ("shared.pb", "whole.pb"):
        result = json.loads(run(dtfm_run, "--simulate", path(name),
                                "--json").splitlines()[0])
        result.pop("plan", None)
        sims.append(result)
    print(f"simulations equal: {sims[0] == sims[1]}")
    smaller = os.path.getsize(path("shared.pb")) <= \
        os.path.getsize(path("whole.pb"))
    # (Where every device's program differs, nothing is shared: a template
    # and an entry each.)
    print(f"shared plan no larger: {smaller or templates == devices}")


if __name__ == "__main__":
    main()
