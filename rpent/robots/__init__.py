"""Robot packages: one sub-package per robot/simulator (``rpent.robots.<name>``).

Each package holds its environment core, env server/client, toolkit and prompts. Importing
this package imports no simulator.
"""
