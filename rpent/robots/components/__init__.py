"""Model services for robots: Pi0.5 VLA server (``pi05_vla_server``), its client (``vla_client``),
the APXInf adapter, SAM3 and replay policy servers.

Each server is a module run with ``python -m rpent.robots.components.<name>``; nothing is imported here
so that importing a client never pulls in torch.
"""
