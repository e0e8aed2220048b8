"""SASS of a cubin as the speed model reads it (tests/gpucc/speedmodel.py): nvdisasm's listing with
line information, per kernel the basic blocks, the control-flow graph, its natural loops (back edges
to a dominating block) nested by containment, the instruction classes, and each loop's source loop
from the line numbers of its instructions.

Instruction classes (sm_90 SASS): ffma (FFMA), falu (FADD, FMUL, FMNMX, FSEL, FSETP, ...), int (the
integer ALU, uniform datapath ops included: IMAD, IADD3, LOP3, ISETP, MOV, U*, ...), lds / sts (LDS,
LDSM / STS, shared atomics), ldg / stg (LDG, LD / STG, ST, RED, ATOM), mufu (MUFU.*), bar (BAR,
MEMBAR), conv (F2F, F2I, I2F, I2FP, F2FP, half-precision ops: HADD2.F32 is f16 -> f32), branch (BRA,
EXIT, BSSY, BSYNC, CALL, RET, ...), other (S2R, LDC, NOP, SHFL, ...)."""
import re

CLASSES = ['ffma', 'falu', 'int', 'lds', 'sts', 'ldg', 'stg', 'mufu', 'bar', 'conv', 'branch', 'other']

_FALU = {'FADD', 'FMUL', 'FMNMX', 'FSEL', 'FSETP', 'FSET', 'FCHK', 'FSWZADD', 'FRND', 'FMUL32I', 'FADD32I'}
_INT = {'IMAD', 'IADD3', 'IADD', 'VIADD', 'VIADDMNMX', 'VIMNMX3', 'LOP3', 'LOP', 'SHF', 'SHL', 'SHR', 'LEA', 'ISETP',
        'IABS', 'SEL', 'IMNMX', 'VIMNMX', 'PRMT', 'MOV', 'MOV32I', 'POPC', 'FLO', 'BREV', 'SGXT', 'BMSK', 'IDP',
        'IMUL', 'PLOP3', 'P2R', 'R2P', 'ICMP', 'IMADSP', 'IMAD32I', 'IADD32I', 'LEA.HI', 'ISCADD', 'XMAD', 'CS2R'}
_CONV = {'F2F', 'F2I', 'I2F', 'I2FP', 'F2FP', 'F2IP', 'I2I', 'I2IP', 'FRND'}
_BRANCH = {'BRA', 'BRX', 'JMP', 'JMX', 'EXIT', 'RET', 'CALL', 'BSSY', 'BSYNC', 'BREAK', 'WARPSYNC', 'YIELD', 'BPT',
           'KILL', 'NANOSLEEP'}


def iclass(op):
    """The class of an opcode with its modifiers (e.g. 'LDG.E.128', 'HADD2.F32', 'MUFU.EX2')."""
    base = op.split('.')[0]
    if base in ('FFMA', 'FFMA32I'):
        return 'ffma'
    if base in _FALU:
        return 'falu'
    if base in _CONV:
        return 'conv'
    if base.startswith(('HADD2', 'HMUL2', 'HFMA2', 'HSET2', 'HSETP2', 'HMNMX2')):
        # ptxas writes moves of constants as HFMA2.MMA Rd, -RZ, RZ, imm (the FMA pipe's idle half)
        return 'int' if op.startswith('HFMA2.MMA') else 'conv'
    if base == 'MUFU':
        return 'mufu'
    if base in ('LDS', 'LDSM'):
        return 'lds'
    if base in ('STS', 'ATOMS'):
        return 'sts'
    if base in ('LDG', 'LD', 'LDGSTS'):
        return 'ldg'
    if base in ('STG', 'ST', 'RED', 'ATOM', 'ATOMG'):
        return 'stg'
    if base in ('BAR', 'MEMBAR', 'DEPBAR', 'ERRBAR'):
        return 'bar'
    if base in _BRANCH:
        return 'branch'
    if base in _INT or (base.startswith('U') and base not in ('UTMALDG',)):
        return 'int'
    return 'other'


def width_bytes(op):
    """Bytes per lane moved by a load or store (LDG.E.128: 16, LDS.64: 8, LDG.E.U16: 2; default 4)."""
    for tok, n in (('.128', 16), ('.64', 8), ('.U16', 2), ('.S16', 2), ('.U8', 1), ('.S8', 1)):
        if tok in op:
            return n
    return 4


class Ins:
    __slots__ = ('addr', 'pred', 'op', 'args', 'line', 'cls', 'target')

    def __init__(self, addr, pred, op, args, line):
        self.addr, self.pred, self.op, self.args, self.line = addr, pred, op, args, line
        self.cls = iclass(op)
        m = re.search(r'`\((\.L_x_\d+)\)', args) if op.split('.')[0] in ('BRA', 'CALL', 'BSSY', 'BREAK', 'JMP') else None
        self.target = m.group(1) if m else None

    def dests(self):
        """Registers written (the first operand of most instructions; a .64/.128 load writes 2/4)."""
        a = self.args.split(',')[0].strip()
        m = re.match(r'^R(\d+)$', a)
        if not m or self.cls in ('stg', 'sts', 'branch', 'bar'):
            return set()
        n = {8: 2, 16: 4}.get(width_bytes(self.op), 1) if self.cls in ('ldg', 'lds') else 1
        return {int(m.group(1)) + i for i in range(n)}

    def srcs(self):
        """Registers read (64-bit operands .64 count their pair)."""
        parts = self.args.split(',')
        first = 0 if self.cls in ('stg', 'sts') else 1
        regs = set()
        for p in parts[first:]:
            for m in re.finditer(r'\bR(\d+)(\.64)?', p):
                r = int(m.group(1))
                regs.add(r)
                if m.group(2):
                    regs.add(r + 1)
        return regs


_INS = re.compile(r'^\s*/\*([0-9a-f]+)\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*(.*?)\s*;')
_LINE = re.compile(r'//## File "([^"]*)", line (\d+)')


def parse_listing(text):
    """{kernel: (instructions, {label: index})} from `nvdisasm -g -c`."""
    funcs, cur, line = {}, None, None
    for raw in text.splitlines():
        m = re.match(r'^\.text\.(\w+):', raw)
        if m:
            cur = funcs.setdefault(m.group(1), ([], {}))
            line = None
            continue
        if cur is None:
            continue
        m = _LINE.search(raw)
        if m:
            line = int(m.group(2))
            continue
        m = re.match(r'^(\.L_x_\d+):', raw)
        if m:
            cur[1][m.group(1)] = len(cur[0])
            continue
        m = _INS.match(raw)
        if m:
            pred = m.group(2).strip() if m.group(2) else None
            cur[0].append(Ins(int(m.group(1), 16), pred, m.group(3), m.group(4), line))
    return funcs


class Block:
    __slots__ = ('i', 'start', 'end', 'succ', 'pred')

    def __init__(self, i, start, end):
        self.i, self.start, self.end, self.succ, self.pred = i, start, end, [], []


class Loop:
    def __init__(self, header, body):
        self.header, self.body = header, body  # block indices
        self.parent, self.children = None, []
        self.src = None      # the source loop it is tied to (speedmodel.SrcLoop)
        self.own = set()     # blocks of this loop not in a nested loop

    def depth(self):
        d, p = 1, self.parent
        while p:
            d, p = d + 1, p.parent
        return d


class Kernel:
    """A kernel's SASS: instructions, blocks reachable from the entry (the subroutines that CALL
    reaches, libclc's slow paths of division and the like, are left out and counted apart), loops."""

    def __init__(self, name, ins, labels):
        self.name, self.ins = name, ins
        lead = {0}
        for k, x in enumerate(ins):
            if x.target and x.op.split('.')[0] in ('BRA', 'JMP'):
                lead.add(labels[x.target])
                lead.add(k + 1)
            elif x.op.split('.')[0] in ('EXIT', 'RET', 'BRX', 'JMX'):
                lead.add(k + 1)
        lead |= set(labels.values())
        starts = sorted(s for s in lead if s < len(ins))
        blocks = [Block(i, s, (starts[i + 1] if i + 1 < len(starts) else len(ins))) for i, s in enumerate(starts)]
        at = {b.start: b.i for b in blocks}
        for b in blocks:
            last = ins[b.end - 1]
            base = last.op.split('.')[0]
            uncond = last.pred in (None, '@PT')
            nxt = [b.i + 1] if b.i + 1 < len(blocks) else []
            if base in ('BRA', 'JMP') and last.target:
                b.succ = [at[labels[last.target]]] + ([] if uncond else nxt)
            elif base in ('EXIT', 'RET'):
                b.succ = [] if uncond else nxt
            elif base in ('BRX', 'JMX'):
                b.succ = nxt  # indirect: not generated for these kernels; treated as a fall-through
            else:
                b.succ = nxt
        # reachable from the entry without CALL
        seen, todo = {0}, [0]
        while todo:
            for s in blocks[todo.pop()].succ:
                if s not in seen:
                    seen.add(s)
                    todo.append(s)
        self.blocks = blocks
        self.live = sorted(seen)
        self.sub_ins = sum(b.end - b.start for b in blocks if b.i not in seen)
        for b in blocks:
            b.succ = [s for s in b.succ if s in seen] if b.i in seen else []
        for i in self.live:
            for s in blocks[i].succ:
                blocks[s].pred.append(i)
        self._loops()

    def _loops(self):
        blocks, live = self.blocks, self.live
        dom = {i: set(live) for i in live}
        dom[0] = {0}
        changed = True
        while changed:
            changed = False
            for i in live:
                if i == 0:
                    continue
                ps = [dom[p] for p in blocks[i].pred]
                d = set.intersection(*ps) | {i} if ps else {i}
                if d != dom[i]:
                    dom[i], changed = d, True
        heads = {}
        for u in live:
            for v in blocks[u].succ:
                if v in dom[u]:  # back edge u -> v
                    body, todo = {v, u}, [u]
                    while todo:
                        x = todo.pop()
                        if x == v:
                            continue
                        for p in blocks[x].pred:
                            if p not in body:
                                body.add(p)
                                todo.append(p)
                    heads.setdefault(v, set()).update(body)
        loops = [Loop(h, frozenset(b)) for h, b in heads.items()]
        loops.sort(key=lambda l: len(l.body))
        for k, l in enumerate(loops):
            for m in loops[k + 1:]:
                if l.body < m.body:
                    l.parent = m
                    m.children.append(l)
                    break
        for l in loops:
            l.own = set(l.body) - set().union(*[c.body for c in l.children])
        self.loops = sorted(loops, key=lambda l: blocks[l.header].start)

    def block_ins(self, i):
        return self.ins[self.blocks[i].start:self.blocks[i].end]

    def innermost(self, i):
        """The innermost loop holding block i, or None."""
        for l in self.loops:
            if i in l.own:
                return l
        return None

    def lines_of(self, blocks):
        return [x.line for b in blocks for x in self.block_ins(b) if x.line is not None]
