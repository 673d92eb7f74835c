#!/usr/bin/env python3
"""scripts/check-deps on a small repository built in a temporary directory: it passes when includes
match the links, and fails, naming the file, on each kind of mistake it exists to catch (a component
including a header of one it does not link, a component linking the tooling on top, a public header
including a private one, a public header without an owner, core linking another component).

Usage: check_deps_test.py REPO_ROOT (the repository whose scripts/check-deps is tested).
"""
import pathlib
import subprocess
import sys
import tempfile

FILES = {
    'sdk/src/core/CMakeLists.txt': 'strata_component(NAME core\n  SOURCES status.cc identifiers.cc)\n',
    'sdk/src/core/status.cc': '#include "strata/status.h"\n',
    'sdk/src/core/identifiers.h': '// internal\n',
    'sdk/src/core/identifiers.cc': '#include "core/identifiers.h"\n',
    'sdk/src/compact/CMakeLists.txt':
        'strata_component(NAME compact\n  SOURCES policies.cc\n  PUBLIC_DEPS strata::core)\n',
    'sdk/src/compact/policies.cc':
        '#include "core/identifiers.h"\n#include "strata/builtin_policies.h"\n',
    'sdk/src/tools/CMakeLists.txt':
        'strata_component(NAME tools\n  SOURCES trace.cc\n  PUBLIC_DEPS strata::core strata::compact)\n',
    'sdk/src/tools/trace.cc': '#include "strata/tools/trace.h"\n#include "core/identifiers.h"\n',
    'sdk/include/strata/status.h': '#include <string>\n',
    'sdk/include/strata/builtin_policies.h': '#include "strata/status.h"\n',
    'sdk/include/strata/tools/trace.h': '#include "strata/builtin_policies.h"\n',
}

# (what is changed, {file: new text}, text the report must contain)
MISTAKES = [
    ('core includes the tooling', {'sdk/src/core/status.cc': '#include "strata/tools/trace.h"\n'},
     'sdk/src/core/status.cc: includes "strata/tools/trace.h" of strata::tools'),
    ('a component reaches a private header of one it does not link',
     {'sdk/src/core/status.cc': '#include "compact/policies.h"\n'},
     'sdk/src/core/status.cc: includes "compact/policies.h" of strata::compact'),
    ('a component links the tooling',
     {'sdk/src/compact/CMakeLists.txt':
          'strata_component(NAME compact\n  SOURCES policies.cc\n  PUBLIC_DEPS strata::core strata::tools)\n'},
     'sdk/src/compact/CMakeLists.txt: links strata::tools, which is tooling'),
    ('a public header includes a private one',
     {'sdk/include/strata/builtin_policies.h': '#include "core/identifiers.h"\n'},
     'sdk/include/strata/builtin_policies.h: includes "core/identifiers.h", which is not a public header'),
    ('a public header without an owner', {'sdk/include/strata/tools/replay.h': '\n'},
     'sdk/include/strata/tools/replay.h: no owner'),
    ('core links another component',
     {'sdk/src/core/CMakeLists.txt':
          'strata_component(NAME core\n  SOURCES status.cc identifiers.cc\n  PRIVATE_DEPS strata::compact)\n'},
     'strata::core links other components'),
]


def run(script, files):
    with tempfile.TemporaryDirectory() as d:
        root = pathlib.Path(d)
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        done = subprocess.run([sys.executable, str(script), str(root)], capture_output=True, text=True)
        return done.returncode, done.stdout + done.stderr


def main():
    script = pathlib.Path(sys.argv[1]) / 'scripts' / 'check-deps'
    failures = []
    code, out = run(script, FILES)
    if code != 0:
        failures.append(f'consistent repository: exit {code}, expected 0:\n{out}')
    for what, change, expect in MISTAKES:
        code, out = run(script, {**FILES, **change})
        if code != 1 or expect not in out:
            failures.append(f'{what}: exit {code}, expected 1 with "{expect}" in:\n{out}')
    for f in failures:
        print('FAIL ' + f)
    print(f'check_deps_test: {len(MISTAKES) + 1 - len(failures)} of {len(MISTAKES) + 1} cases pass')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
