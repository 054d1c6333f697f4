"""Golden model of the all-reduce toolkit: topologies, algorithms, the schedule IR, the functional
executor and the timing model. Pure numpy/networkx; never imports Amaranth or cocotb."""
