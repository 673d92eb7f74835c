#!/usr/bin/env python3
"""Doxygen input filter for strata's public headers: reads them as their comments are written.

The headers use plain `//` comments (Google style), which doxygen ignores. This filter, run by
doxygen on each header (INPUT_FILTER in Doxyfile), turns them into documentation without changing
the files:
  - the banner at the top of the file becomes the file's documentation (\\file);
  - a block of `//` lines directly above a declaration (no blank line between) documents that
    declaration only: the declarations after it need their own comments;
  - a `// ...` comment after code on the same line documents that member (`///<`);
  - a comment above a run of one-line declarations of one name (no blank line, no comment between
    them: the const, & and && overloads of an accessor) documents each of them (a member group,
    with DISTRIBUTE_GROUP_DOC); a run declaring different names is not a group.
Section dividers (`// --- Content ---`, a line of dashes) document nothing. Comments followed by a
blank line, and those after a closing brace or a preprocessor line, stay plain comments. The line
count is unchanged, so doxygen's line numbers are the file's.
"""
import re
import sys

TRAILING = re.compile(r'^(?P<code>[^"/]*?(?:"[^"\\]*(?:\\.[^"\\]*)*"[^"/]*?)*\S)(?P<gap>\s+)//(?P<text>.*)$')
ENTITY = re.compile(r'&(\w+);')  # `&sink;` in an example is code, not an HTML entity
NO_TRAILING_DOC = re.compile(r'^\s*(}|#|public:|private:|protected:|namespace\b)')
DIVIDER = re.compile(r'^\s*//\s*(-{3,}.*|=+|-+)\s*$')  # `// --- Content ---`, `// -----`
DECLARED_NAME = re.compile(r'(~?\w+|operator\W+)\s*\(')


def declared_name(line):
    """The name a one-line function declaration declares (`Get` in `const T& Get() const&;`)."""
    m = DECLARED_NAME.search(line)
    return m.group(1) if m else None


def one_line_declaration(line):
    """A whole declaration on one line without a comment: `int f() const;`, `T g() { ... }`."""
    text = line.strip()
    if not text or '//' in text or text.startswith(('}', '#', 'public:', 'private:', 'protected:')):
        return False
    if not text.endswith((';', '}')):
        return False
    return text.count('(') == text.count(')') and text.count('{') == text.count('}')


def convert(lines):
    out = list(lines)
    n = len(lines)
    i = 0
    # The banner: leading // lines.
    if n and lines[0].startswith('//'):
        j = 0
        while j < n and lines[j].startswith('//'):
            out[j] = '///' + ENTITY.sub(r'&amp;\1;', lines[j][2:])
            j += 1
        out[0] = '/// \\file' + (' ' + lines[0][2:].strip() if lines[0][2:].strip() else '')
        i = j
    while i < n:
        stripped = lines[i].lstrip()
        if stripped.startswith('//'):
            j = i
            while j < n and lines[j].lstrip().startswith('//'):
                j += 1
            following = lines[j].strip() if j < n else ''
            if all(DIVIDER.match(lines[k]) for k in range(i, j)):
                following = ''  # a divider documents nothing
            if following and not following.startswith(('}', 'public:', 'private:', 'protected:',
                                                       '#if', '#endif', '#include', '#else')):
                for k in range(i, j):
                    indent = lines[k][:len(lines[k]) - len(lines[k].lstrip())]
                    body = lines[k].lstrip()[2:]
                    if not body.startswith('/') and not DIVIDER.match(lines[k]):
                        out[k] = indent + '///' + ENTITY.sub(r'&amp;\1;', body)
                end = j
                name = declared_name(lines[j]) if one_line_declaration(lines[j]) else None
                while (end < n and name is not None and one_line_declaration(lines[end]) and
                       declared_name(lines[end]) == name):
                    end += 1
                if end - j >= 2:
                    indent = lines[j][:len(lines[j]) - len(lines[j].lstrip())]
                    out[j] = indent + '/**@{*/ ' + lines[j].lstrip()
                    out[end - 1] = lines[end - 1] + ' /**@}*/'
                    i = end
                    continue
            i = j
            continue
        m = TRAILING.match(lines[i])
        if m and not NO_TRAILING_DOC.match(lines[i]) and not m.group('text').startswith('/'):
            out[i] = m.group('code') + m.group('gap') + '///<' + m.group('text')
        i += 1
    return out


def main():
    with open(sys.argv[1], encoding='utf-8') as f:
        lines = f.read().split('\n')
    sys.stdout.write('\n'.join(convert(lines)))


if __name__ == '__main__':
    main()
