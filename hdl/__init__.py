"""Synthesizable Amaranth HDL of the MultiTree network interface and the network top.

Modules (docs/hardware.md is the contract): ``config`` (NIConfig), ``flit`` (Flit, FlitKind,
HeadInfo, FlitStream), ``schedule_table`` (ScheduleRow, pack_row, engine_index), ``host``
(HostCmd/HostRsp and pure-Python command builders), ``ram`` (multi-port RAM, Memory or compact
Verilog), ``ops`` (width-exact comparisons for lint-clean Verilog), ``link`` (Link),
``credit`` (CreditCounter, CreditReturn), ``reduction``
(ReductionUnit), ``send_engine``, ``receive_engine``, ``ni`` (NetworkInterface), ``network``
(Network), ``generate`` (to_verilog, network_config_for). Nothing here imports cocotb.
"""
