#!/usr/bin/env python3
"""docs/api/doxygen_filter.py on small headers: a comment documents the declaration it precedes and
no other, a section divider documents nothing, and the const/&/&& overloads of one accessor share
their comment. Each case fails when the filter credits a comment to the wrong declaration.

Usage: doxygen_filter_test.py REPO_ROOT
"""
import importlib.util
import pathlib
import sys


def load(root):
    spec = importlib.util.spec_from_file_location('doxygen_filter',
                                                  root / 'docs' / 'api' / 'doxygen_filter.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# (what, header lines, the lines expected to become documentation, those expected to stay plain)
CASES = [
    ('a comment documents only the next declaration',
     ['// The first.', 'int first;', 'int second;'],
     ['/// The first.'], ['int second;']),
    ('a section divider documents nothing',
     ['  // --- Content ------', '  Status SetA(int a);', '  Status SetB(int b);'],
     [], ['  // --- Content ------', '  Status SetA(int a);', '  Status SetB(int b);']),
    ('a divider above a comment leaves the comment to its declaration',
     ['  // --- Counts ---', '  // The count.', '  int Count() const;', '  int Other() const;'],
     ['  /// The count.'], ['  // --- Counts ---', '  int Other() const;']),
    ('the overloads of one accessor share their comment',
     ['  // The value.', '  const T& value() const&;', '  T& value() &;', '  T&& value() &&;'],
     ['  /// The value.', '  /**@{*/ const T& value() const&;', '  T&& value() &&; /**@}*/'], []),
    ('declarations of different names are not a group',
     ['  // The name.', '  std::string Name() const;', '  int Size() const;'],
     ['  /// The name.'], ['  int Size() const;']),
]


def main():
    root = pathlib.Path(sys.argv[1])
    convert = load(root).convert
    failures = []
    for what, lines, documented, plain in CASES:
        # A first line that is not a banner, so the cases test members, not the file comment.
        out = convert(['namespace x {'] + lines)[1:]
        for line in documented:
            if line not in out:
                failures.append(f'{what}: expected {line!r} in {out}')
        for line in plain:
            if line not in out:
                failures.append(f'{what}: expected {line!r} unchanged in {out}')
    for f in failures:
        print('FAIL ' + f)
    print(f'doxygen_filter_test: {len(CASES)} cases, {len(failures)} failures')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
