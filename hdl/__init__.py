"""Synthesizable Amaranth HDL of the MultiTree network interface and the network top.

Modules (docs/hardware.md is the contract): ``config`` (NIConfig, network_config_for,
check_schedule_fits: the hardware's limits in one table), ``adders`` (the hardware adder of each
element type), ``flit`` (Flit, FlitKind, HeadInfo, FlitStream), ``schedule_table`` (ScheduleRow,
pack_row, engine_index, engine_tables), ``host`` (HostCmd/HostRsp and pure-Python command builders),
``ram`` (multi-port RAM, Memory or compact Verilog), ``ops`` (width-exact comparisons for lint-clean
Verilog), ``link`` (Link), ``credit`` (CreditCounter, CreditReturn), ``reduction`` (ReductionUnit),
``send_engine``, ``receive_engine``, ``ni`` (NetworkInterface), ``network`` (Network), ``generate``
(to_verilog, build_network). Nothing here imports cocotb.
"""
