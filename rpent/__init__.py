"""rpent: an open workbench for LLM-driven robot manipulation research.

Data flows one way: CLI/TUI -> run -> planner -> toolkit -> clients -> RPC -> servers
(LIBERO/MuJoCo env server, Pi0.5 VLA server, SAM3 server). See ``docs/interfaces.md``.
"""

__version__ = "0.1.0"
