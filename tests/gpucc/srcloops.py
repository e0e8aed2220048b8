"""The source side of the speed model (tests/gpucc/speedmodel.py): the OpenCL program as compiled for
line information, and its loops.

demacro(): the kernels defined by multi-line macros (RQ_GA_KERNEL(NAME, LD4) and the like) get one
source line for all their code in the debug information (the line of the invocation), so for the
model's compile each such invocation is replaced by the macro's body with the arguments substituted,
line by line. The tokens are the same, so the code is too (speedmodel.py checks it: the SASS of this
compile and of the plain one, opcode for opcode). Which definition an invocation uses (a macro defined
under #if / #else twice) is the preprocessor's answer: a probe run of clang -E with each definition
replaced by a marker.

loops(): per kernel, the for / while / do loops of its body (a small statement parser over the
tokens: braces, single-statement bodies, if / else), each with its header line, last line, parent.
branches(): the if statements of a kernel's body, each with the lines of its two parts (a launch
description weights a part whose code a bench shape runs rarely or never: model_eval)."""
import re
import subprocess

_DEF = re.compile(r'\s*#\s*define\s+(\w+)\(([^)]*)\)\s*\\\s*$')


def _macro_defs(lines):
    """The function-like multi-line #defines of `lines`: (match of _DEF, index of the #define line,
    index of its last line, [(1-based line, body text without the continuation backslash)])."""
    i = 0
    while i < len(lines):
        m = _DEF.match(lines[i])
        if not m:
            i += 1
            continue
        j, body = i, []
        while lines[j].rstrip().endswith('\\') and j + 1 < len(lines):
            j += 1
            b = lines[j].rstrip()
            body.append((j + 1, b[:-1] if b.endswith('\\') else b))
        yield m, i, j, body
        i = j + 1


def demacro(text, clang, opts):
    """(text, origin): the program with kernel-defining macro invocations expanded in place, and for
    each of its lines (1-based, origin[i - 1]) the line of the input it came from."""
    lines = text.split('\n')
    defs = []  # (name, params, first line index, last line index, [(input line, body text)])
    for m, i, j, body in _macro_defs(lines):
        joined = '\n'.join(b for _, b in body)
        if re.search(r'\b(__kernel|kernel)\b', joined) and '##' not in joined and not re.search(r'(^|[^#"])#\s*\w', joined):
            defs.append((m.group(1), [p.strip() for p in m.group(2).split(',')], i, j, body))
    if not defs:
        return text, list(range(1, len(lines) + 1))
    probe = list(lines)
    for k, (name, params, a, b, _) in enumerate(defs):
        probe[a] = '#define %s(%s) RQDM_%d(%s)' % (name, ','.join(params), k, ','.join(params))
        for x in range(a + 1, b + 1):
            probe[x] = ''
    p = subprocess.run([clang, '-E', '-P', '-x', 'cl', '-cl-std=CL1.2'] + opts.split() + ['-'],
                       input='\n'.join(probe).encode(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    use = {}
    for m in re.finditer(r'RQDM_(\d+)\(\s*(\w+)', p.stdout.decode('utf-8', 'replace')):
        use[(defs[int(m.group(1))][0], m.group(2))] = int(m.group(1))
    names = {d[0] for d in defs}
    out, origin = [], []
    for i, l in enumerate(lines):
        m = re.match(r'^(\w+)\(\s*(\w+)([^()]*)\)\s*;?\s*$', l)
        if m and m.group(1) in names and (m.group(1), m.group(2)) in use:
            name, params, a, b, body = defs[use[(m.group(1), m.group(2))]]
            args = [x.strip() for x in (m.group(2) + m.group(3)).split(',')]
            for ln, bt in body:
                for pp, aa in zip(params, args):
                    bt = re.sub(r'\b%s\b' % re.escape(pp), aa, bt)
                out.append(bt)
                origin.append(ln)
        else:
            out.append(l)
            origin.append(i + 1)
    return '\n'.join(out), origin


def tokens(text):
    """[(token, line)] of C text: identifiers, numbers, single punctuation characters; comments,
    strings and preprocessor lines left out."""
    toks, i, line, n = [], 0, 1, len(text)
    bol = True
    while i < n:
        c = text[i]
        if c == '\n':
            line += 1
            i += 1
            bol = True
            continue
        if c in ' \t\r\\':
            i += 1
            continue
        if bol and c == '#':  # a preprocessor line (continuations and comments across lines included)
            while i < n and text[i] != '\n':
                if text[i] == '\\' and i + 1 < n and text[i + 1] == '\n':
                    line += 1
                    i += 1
                elif text.startswith('/*', i):
                    e = text.find('*/', i + 2)
                    e = n if e < 0 else e + 1
                    line += text.count('\n', i, e)
                    i = e
                i += 1
            continue
        bol = False
        if text.startswith('//', i):
            while i < n and text[i] != '\n':
                i += 1
            continue
        if text.startswith('/*', i):
            e = text.find('*/', i + 2)
            e = n if e < 0 else e + 2
            line += text.count('\n', i, e)
            i = e
            continue
        if c in '"\'':
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            toks.append(('""', line))
            i = j + 1
            continue
        m = re.compile(r'[A-Za-z_]\w*|\d[\w.]*').match(text, i)
        if m:
            toks.append((m.group(0), line))
            i = m.end()
            continue
        toks.append((c, line))
        i += 1
    return toks


class SrcLoop:
    def __init__(self, head, parent):
        self.head, self.last, self.parent, self.children = head, head, parent, []
        self.text = ''

    def depth(self):
        d, p = 1, self.parent
        while p:
            d, p = d + 1, p.parent
        return d

    def contains(self, line):
        return self.head <= line <= self.last


_OPEN = {'(': ')', '[': ']', '{': '}'}


def _match(toks, i):
    """Index of the bracket closing toks[i]."""
    want, depth = [], 0
    for j in range(i, len(toks)):
        t = toks[j][0]
        if t in _OPEN:
            want.append(_OPEN[t])
        elif want and t == want[-1]:
            want.pop()
            if not want:
                return j
    return len(toks) - 1


def kernel_aliases(text, name):
    """[(macro, first line, last line)]: object-like macros defined as `name` (#define NAME name), each
    with the lines where that definition holds: a template included once per kernel names its kernel
    through one (cl/paged_fast_task.tpl.cl: `void RQ_FAST_NAME(...)`, cl/embed.py's .tpl.cl)."""
    out, open_ = [], {}
    lines = text.split('\n')
    for i, l in enumerate(lines, 1):
        m = re.match(r'\s*#\s*define\s+(\w+)\s+(\w+)\s*(?:/\*.*\*/\s*)?$', l)
        u = re.match(r'\s*#\s*undef\s+(\w+)', l)
        if m and m.group(2) == name:
            open_[m.group(1)] = i
        elif (m or u) and (m or u).group(1) in open_:
            mac = (m or u).group(1)
            out.append((mac, open_.pop(mac), i))
    out += [(mac, a, len(lines)) for mac, a in open_.items()]
    return out


def kernel_body(toks, name, text=None):
    """(first, last) token indices of the braces of kernel `name`'s body, or None. With the text, a
    kernel named through an object-like macro (kernel_aliases) is found too."""
    names = [(name, 0, float('inf'))] + (kernel_aliases(text, name) if text is not None else [])
    for i, (t, ln) in enumerate(toks):
        if any(t == n and a <= ln <= b for n, a, b in names) and i + 1 < len(toks) and toks[i + 1][0] == '(':
            back = [x[0] for x in toks[max(0, i - 40):i]]
            if 'void' not in back or not ('__kernel' in back or 'kernel' in back):
                continue
            j = _match(toks, i + 1) + 1
            if j < len(toks) and toks[j][0] == '{':
                return j, _match(toks, j)
    return None


def function_body(toks, name):
    """(first, last) token indices of the braces of the definition of function `name` (a helper),
    or None."""
    for i, (t, _) in enumerate(toks):
        if t == name and i + 1 < len(toks) and toks[i + 1][0] == '(' and (i == 0 or toks[i - 1][0] not in ('.', '>')):
            j = _match(toks, i + 1) + 1
            if j < len(toks) and toks[j][0] == '{':
                return j, _match(toks, j)
    return None


class SrcBranch:
    """An if statement: its line, and the first and last lines of its then part and else part
    (else part None when there is none); rest: where it has no else part and its then part ends in
    a return, the lines of the statements after it in its block (what runs when the condition is
    false), else None."""

    def __init__(self, head, then, other, rest=None):
        self.head, self.then, self.other, self.rest = head, then, other, rest


def loops(text, name):
    """The loops of kernel `name` in text: [SrcLoop], outer before inner; None if no such kernel."""
    r = _parse(text, name)
    return r[0] if r else None


def branches(text, name):
    """The if statements of kernel `name` in text: [SrcBranch]; None if no such kernel."""
    r = _parse(text, name)
    return r[1] if r else None


def loop_macros(text):
    """Names of the statement macros (#define NAME(...), no kernel inside) whose body holds a rolled
    loop (a for / while / do not under a plain `unroll` pragma): their invocation is a line of the
    kernel holding whole loops, whose SASS carries that one line (RQ_GA_NF_FIX, cl/attention_gpu.cl)."""
    out = set()
    for m, _, _, body in _macro_defs(text.split('\n')):
        joined = '\n'.join(b for _, b in body)
        if not re.search(r'\b(__kernel|kernel)\b', joined):
            heads = re.findall(r'(_Pragma\("unroll(?: \d+)?"\)\s*)?\b(for|while|do)\b\s*[({]', joined)
            if any(not p or 'unroll 1' in p for p, _ in heads):
                out.add(m.group(1))
    return out


def _parse(text, name, helper=False):
    toks = tokens(text)
    kb = function_body(toks, name) if helper else kernel_body(toks, name, text)
    if not kb:
        return None
    lines = text.split('\n')
    found, ifs = [], []
    lmac = loop_macros(text)

    def stmt(i, end, parent):
        """Parses the statement at toks[i]; returns the index after it."""
        if i > end:
            return i
        t = toks[i][0]
        if t == '{':
            j = _match(toks, i)
            k = i + 1
            while k < j:
                k = stmt(k, j - 1, parent)
            return j + 1
        if t == '_Pragma':
            return stmt(_match(toks, i + 1) + 1, end, parent)
        if t in ('for', 'while'):
            lp = SrcLoop(toks[i][1], parent)
            lp.text = ' '.join(lines[lp.head - 1].split())
            found.append(lp)
            if parent:
                parent.children.append(lp)
            e = stmt(_match(toks, i + 1) + 1, end, lp)
            lp.last = toks[e - 1][1]
            return e
        if t == 'do':
            lp = SrcLoop(toks[i][1], parent)
            lp.text = ' '.join(lines[lp.head - 1].split())
            found.append(lp)
            if parent:
                parent.children.append(lp)
            e = stmt(i + 1, end, lp)
            if e <= end and toks[e][0] == 'while':
                e = _match(toks, e + 1) + 1
            if e <= end and toks[e][0] == ';':
                e += 1
            lp.last = toks[e - 1][1]
            return e
        if t in ('if', 'switch'):
            b = _match(toks, i + 1) + 1
            e = stmt(b, end, parent)
            def first(j):  # a block's first statement, not its brace (often on the if's own line)
                return toks[j + 1][1] if toks[j][0] == '{' and j + 1 <= end else toks[j][1]
            then, other, rest = (first(b), toks[e - 1][1]), None, None
            if e <= end and toks[e][0] == 'else':
                e2 = stmt(e + 1, end, parent)
                other = (first(e + 1), toks[e2 - 1][1])
                e = e2
            elif e <= end:
                # the then part's last statement: after the last ';' or '}' before its end at its depth
                k = e - 2 if toks[e - 1][0] == '}' else e - 1
                depth, st0 = 0, b + 1 if toks[b][0] == '{' else b
                for q in range(k - 1, b - 1, -1):
                    if toks[q][0] in ')]}':
                        depth += 1
                    elif toks[q][0] in '([{':
                        if depth == 0:
                            break
                        depth -= 1
                    elif depth == 0 and toks[q][0] == ';':
                        st0 = q + 1
                        break
                if toks[st0][0] == 'return':
                    rest = (toks[e][1], toks[end][1])
            if t == 'if':
                ifs.append(SrcBranch(toks[i][1], then, other, rest))
            return e
        if t == 'else':
            return stmt(i + 1, end, parent)
        if t in lmac and i + 1 <= end and toks[i + 1][0] == '(':
            # a loop macro's invocation: one loop on its line (its nested loops share the line)
            lp = SrcLoop(toks[i][1], parent)
            lp.text = ' '.join(lines[lp.head - 1].split())
            found.append(lp)
            if parent:
                parent.children.append(lp)
            e = _match(toks, i + 1) + 1
            if e <= end and toks[e][0] == ';':
                e += 1
            lp.last = toks[e - 1][1]
            return e
        j = i
        while j <= end and toks[j][0] != ';':
            if toks[j][0] in _OPEN:
                j = _match(toks, j)
            j += 1
        return j + 1

    stmt(kb[0], kb[1], None)
    return found, ifs


def resolve_branch(text, name, snippet):
    """(lines (first, last), span): the part of an if statement a description names, and the lines
    of the kernel holding it (None for a helper's: its code is inlined among the kernel's): 'snippet' is the then part of the if on the line holding snippet
    (whitespace-insensitive), 'else:snippet' its else part (for an if with no else whose then part
    returns: the rest of its block). '@helper snippet' names an if of helper function `helper` (a
    kernel's inlined code: the dtype branches of a load), '@helper' alone all of the helper. Raises
    ValueError when the snippet is absent, ambiguous or on no if line."""
    part = 'then'
    if snippet.startswith('else:'):
        part, snippet = 'else', snippet[5:]
    helper = False
    if snippet.startswith('@'):
        fn, _, snippet = snippet[1:].partition(' ')
        toks = tokens(text)
        fb = function_body(toks, fn)
        if not fb:
            raise ValueError('%s: no helper function %s' % (name, fn))
        span = (toks[fb[0]][1], toks[fb[1]][1])
        if not snippet.strip():
            return span, None
        name, helper = fn, True
    else:
        span = kernel_lines(text, name)
    norm = ' '.join(snippet.split())
    hits = [i + 1 for i, l in enumerate(text.split('\n')[span[0] - 1:span[1]], span[0] - 1)
            if norm in ' '.join(l.split())]
    if len(hits) != 1:
        raise ValueError('%s: "%s" occurs %d times in the kernel, not once' % (name, snippet, len(hits)))
    br = [b for b in _parse(text, name, helper)[1] if b.head == hits[0]]
    if not br:
        raise ValueError('%s: "%s" (line %d) is not the line of an if' % (name, snippet, hits[0]))
    rng = br[0].then if part == 'then' else br[0].other or br[0].rest
    if rng is None:
        raise ValueError('%s: the if of "%s" has no else part' % (name, snippet))
    return rng, None if helper else span


def kernel_lines(text, name):
    """(first, last) lines of kernel `name`'s body."""
    toks = tokens(text)
    kb = kernel_body(toks, name, text)
    return (toks[kb[0]][1], toks[kb[1]][1]) if kb else None


def resolve(text, name, found, snippet):
    """The source loop a description's snippet names: the innermost loop of kernel `name` holding the
    line where the snippet occurs (whitespace-insensitive); 'snippet#n' takes its n-th occurrence in
    the kernel. Raises ValueError when it is absent, ambiguous or outside every loop."""
    m = re.match(r'^(.*?)#(\d+)$', snippet)
    want, nth = (m.group(1), int(m.group(2))) if m else (snippet, None)
    span = kernel_lines(text, name)
    norm = ' '.join(want.split())
    hits = [i + 1 for i, l in enumerate(text.split('\n')[span[0] - 1:span[1]], span[0] - 1)
            if norm in ' '.join(l.split())]
    if not hits:
        raise ValueError('%s: no line of the kernel holds "%s"' % (name, want))
    if nth is not None:
        if nth < 1 or nth > len(hits):
            raise ValueError('%s: "%s" occurs %d times, not %d' % (name, want, len(hits), nth))
        hits = [hits[nth - 1]]

    def inner(line):
        best = None
        for lp in found:
            if lp.contains(line) and (best is None or lp.depth() > best.depth()):
                best = lp
        return best
    loops_hit = {id(inner(h)): inner(h) for h in hits}
    if len(loops_hit) != 1:
        raise ValueError('%s: "%s" occurs in %d loops (lines %s): add #n' % (name, want, len(loops_hit), hits))
    lp = next(iter(loops_hit.values()))
    if lp is None:
        raise ValueError('%s: "%s" (line %d) is in no loop' % (name, want, hits[0]))
    return lp


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"[ \t]*(?://.*|/\*.*\*/)?[ \t]*$')


def program_origins(root_cl, text):
    """(file, line) of each line of the program text, by cl/embed.py's resolution of root_cl (each
    file once, where first included, a banner line before it); None where the files at hand do not
    give back `text` (another checkout)."""
    import os
    seen, out, lines = set(), [], []

    def walk(path):
        path = os.path.realpath(path)
        if path in seen:
            return
        seen.add(path)
        name = os.path.basename(path)
        out.append((name, 0))
        lines.append('/* ---- %s ---- */' % name)
        with open(path, encoding='utf-8', errors='replace') as f:
            for i, l in enumerate(f.read().splitlines(), 1):
                m = _INCLUDE.match(l)
                if m:
                    walk(os.path.join(os.path.dirname(path), m.group(1)))
                else:
                    out.append((name, i))
                    lines.append(l)
    try:
        walk(root_cl)
    except OSError:
        return None
    return out if lines == text.split('\n')[:len(lines)] and len(text.rstrip('\n').split('\n')) == len(lines) else None
