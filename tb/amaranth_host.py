"""Drive the host ports of a ``Network`` or ``RoutedNetwork`` in the Amaranth simulator (the
``host_cmd`` / ``host_rsp`` streams of every node in parallel, with optional random valid gaps
and ready back-pressure); the command words come from ``hdl.host``."""

import random

__all__ = ["stream_commands"]


async def stream_commands(ctx, net, commands, *, rng=None, gap=0.0, backpressure=0.0):
    """Send ``commands[u]`` (HostCmd words) to node u's ``host_cmd``, all nodes at once.

    Parameters
    ----------
    ctx : amaranth.sim testbench context
    net : Network
    commands : list of list of int
    rng : random.Random, optional
    gap, backpressure : float
        Probability of an idle cycle on ``host_cmd.valid`` and of ``host_rsp.ready`` low.

    Returns
    -------
    list of list of int
        Node u's ``host_rsp`` data words, in order.
    """
    rng = rng or random.Random(0)
    n = len(commands)
    pos = [0] * n
    expect = [sum(1 for w in cmds if not w & 1) for cmds in commands]
    rsps = [[] for _ in range(n)]
    while any(pos[u] < len(commands[u]) for u in range(n)) or any(
            len(rsps[u]) < expect[u] for u in range(n)):
        offered = [False] * n
        for u in range(n):
            cmd = net.host_cmd[u]
            if pos[u] < len(commands[u]) and rng.random() >= gap:
                ctx.set(cmd.valid, 1)
                ctx.set(cmd.payload.as_value(), commands[u][pos[u]])
                offered[u] = True
            else:
                ctx.set(cmd.valid, 0)
            ctx.set(net.host_rsp[u].ready, int(rng.random() >= backpressure))
        accepted = [offered[u] and ctx.get(net.host_cmd[u].ready) for u in range(n)]
        got = [ctx.get(net.host_rsp[u].valid) and ctx.get(net.host_rsp[u].ready)
               for u in range(n)]
        data = [ctx.get(net.host_rsp[u].payload.data) if got[u] else None for u in range(n)]
        await ctx.tick()
        for u in range(n):
            if accepted[u]:
                pos[u] += 1
            if got[u]:
                rsps[u].append(data[u])
    for u in range(n):
        ctx.set(net.host_cmd[u].valid, 0)
        ctx.set(net.host_rsp[u].ready, 0)
    return rsps
