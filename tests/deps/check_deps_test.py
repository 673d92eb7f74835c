#!/usr/bin/env python3
"""scripts/check-deps on a small repository built in a temporary directory: it passes when includes
match the links, and fails, naming the file, on each kind of mistake it exists to catch (a component
including a header of one it does not link, in either include form, a component linking the tooling
on top, a public header including a private one, a header of a component linked only privately or
another library, a public header without an owner, core linking another component, a PUBLIC link no
public header needs, and an app, a benchmark or a binding including a header of a component its
targets do not link).

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
        'strata_component(NAME compact\n  SOURCES policies.cc\n  PUBLIC_DEPS strata::core\n'
        '  PRIVATE_DEPS strata::transport)\n',
    'sdk/src/compact/policies.cc':
        '#include "core/identifiers.h"\n#include "strata/builtin_policies.h"\n#include "strata/transport.h"\n',
    'sdk/src/transport/CMakeLists.txt':
        'strata_component(NAME transport\n  SOURCES transport.cc\n  PUBLIC_DEPS strata::core)\n',
    'sdk/src/transport/transport.cc': '#include "strata/transport.h"\n',
    'sdk/include/strata/transport.h': '#include <string>\n#include "strata/status.h"\n',
    'sdk/apps/strata/CMakeLists.txt':
        'add_executable(strata_cli main.cc)\ntarget_link_libraries(strata_cli PRIVATE strata::compact)\n',
    'sdk/apps/strata/main.cc': '#include <string>\n#include "strata/builtin_policies.h"\n',
    'bench/CMakeLists.txt':
        'add_executable(bench_compact bench_compact.cc)\n'
        'target_link_libraries(bench_compact PRIVATE strata::compact)\n',
    'bench/bench_compact.cc': '#include "core/identifiers.h"\n#include "strata/builtin_policies.h"\n',
    'bindings/python/CMakeLists.txt':
        'pybind11_add_module(strata_python MODULE src/module.cc)\n'
        'target_link_libraries(strata_python PRIVATE strata::compact)\n',
    'bindings/python/src/module.cc': '#include "strata/builtin_policies.h"\n',
    'sdk/src/replay/CMakeLists.txt':
        'strata_component(NAME replay\n  SOURCES trace.cc\n  PUBLIC_DEPS strata::core strata::compact)\n',
    'sdk/src/replay/trace.cc': '#include "strata/replay/trace.h"\n#include "core/identifiers.h"\n',
    'sdk/include/strata/status.h': '#include <string>\n',
    'sdk/include/strata/builtin_policies.h': '#include "strata/status.h"\n',
    'sdk/include/strata/replay/trace.h': '#include "strata/builtin_policies.h"\n#include "strata/status.h"\n',
}

# (what is changed, {file: new text}, text the report must contain)
MISTAKES = [
    ('core includes the tooling', {'sdk/src/core/status.cc': '#include "strata/replay/trace.h"\n'},
     'sdk/src/core/status.cc: includes "strata/replay/trace.h" of strata::replay'),
    ('a component reaches a private header of one it does not link',
     {'sdk/src/core/status.cc': '#include "compact/policies.h"\n'},
     'sdk/src/core/status.cc: includes "compact/policies.h" of strata::compact'),
    ('a component links the tooling',
     {'sdk/src/compact/CMakeLists.txt':
          'strata_component(NAME compact\n  SOURCES policies.cc\n  PUBLIC_DEPS strata::core strata::replay)\n'},
     'sdk/src/compact/CMakeLists.txt: links strata::replay, which is tooling'),
    ('a public header includes a private one',
     {'sdk/include/strata/builtin_policies.h': '#include "core/identifiers.h"\n'},
     'sdk/include/strata/builtin_policies.h: includes "core/identifiers.h", which is not a public header'),
    ('a public header without an owner', {'sdk/include/strata/replay/replay.h': '\n'},
     'sdk/include/strata/replay/replay.h: no owner'),
    ('core includes the tooling with angle brackets', {'sdk/src/core/status.cc': '#include <strata/replay/trace.h>\n'},
     'sdk/src/core/status.cc: includes "strata/replay/trace.h" of strata::replay'),
    ('a public header includes a header of a component its owner links only privately',
     {'sdk/include/strata/builtin_policies.h': '#include "strata/status.h"\n#include "strata/transport.h"\n'},
     'sdk/include/strata/builtin_policies.h (strata::compact): includes "strata/transport.h" of '
     'strata::transport, which strata::compact links only PRIVATE'),
    ('a public header includes another library',
     {'sdk/include/strata/builtin_policies.h': '#include "strata/status.h"\n#include <nlohmann/json.hpp>\n'},
     'sdk/include/strata/builtin_policies.h: includes <nlohmann/json.hpp>, which is not the standard library'),
    ('a component links PUBLIC what no public header of it includes',
     {'sdk/src/compact/CMakeLists.txt':
          'strata_component(NAME compact\n  SOURCES policies.cc\n  PUBLIC_DEPS strata::core strata::transport)\n'},
     'sdk/src/compact/CMakeLists.txt: links strata::transport PUBLIC, but no public header'),
    ('an app includes a header of a component it does not link',
     {'sdk/apps/strata/main.cc': '#include "strata/replay/trace.h"\n'},
     'sdk/apps/strata/main.cc: includes "strata/replay/trace.h" of strata::replay, which no target of sdk/apps/strata'),
    ('a benchmark includes a private header of a component it does not link',
     {'bench/bench_compact.cc': '#include <transport/chat_parser.h>\n'},
     'bench/bench_compact.cc: includes "transport/chat_parser.h" of strata::transport, which no target of bench'),
    ('a binding includes a header of a component it does not link',
     {'bindings/python/src/module.cc': '#include "strata/replay/eval.h"\n'},
     'bindings/python/src/module.cc: includes "strata/replay/eval.h" of strata::replay, which no target of '
     'bindings/python'),
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
