"""``python -m rpent.planners.provider_endpoint``: serve a scripted conversation.

    python -m rpent.planners.provider_endpoint --script conv.json --port 0 \
        [--host 127.0.0.1] [--api-key KEY] [--record requests.jsonl] [--loop] [--quiet]

Prints ``provider endpoint listening on http://127.0.0.1:<port>`` (flushed) once it
accepts connections, then one line per request; Ctrl-C or SIGTERM stops it. Point a
planner at it with ``ANTHROPIC_BASE_URL=http://127.0.0.1:<port>`` or
``OPENAI_BASE_URL=http://127.0.0.1:<port>/v1`` (any API key unless ``--api-key``).
The script is replayed once (later requests get its ``when_exhausted`` reply): restart the
endpoint for the next conversation, or pass ``--loop`` to start the script over each time.
Exit codes: 0 on a clean stop, 2 on a bad script file, a bad port or an address it cannot listen on.
"""

from __future__ import annotations

import argparse
import signal
import sys

from rpent.planners.provider_endpoint.script import ScriptError, load_script
from rpent.planners.provider_endpoint.server import ProviderEndpoint


def _port(text: str) -> int:
    """``--port``: an integer 0-65535 (0 picks a free port)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port; give 0-65535 (0 picks a free one)") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a TCP port; give 0-65535 (0 picks a free one)")
    return port


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, load the script, serve until interrupted; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m rpent.planners.provider_endpoint",
                                     description="Scripted Anthropic/OpenAI-compatible endpoint for offline planner runs.")
    parser.add_argument("--script", required=True,
                        help="JSON script ({'turns': [...]}) or a recorded planner transcript to replay")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=_port, default=0, help="TCP port; 0 picks a free one (default)")
    parser.add_argument("--api-key", default=None, help="require this key (x-api-key or Bearer); default: accept any")
    parser.add_argument("--record", default=None, help="append every request (parsed + raw body) to this JSONL file")
    parser.add_argument("--loop", action="store_true",
                        help="start the script over once its turns are used up (serve one conversation after another); "
                             "default: replay it once, then answer with its when_exhausted reply")
    parser.add_argument("--quiet", action="store_true", help="no per-request log lines")
    args = parser.parse_args(argv)
    try:
        script = load_script(args.script)
    except ScriptError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    script.loop = script.loop or args.loop
    try:
        ep = ProviderEndpoint(script, host=args.host, port=args.port, api_key=args.api_key,
                              record_path=args.record, log=None if args.quiet else sys.stdout)
    except OSError as exc:  # port taken, host not an address of this machine, no permission
        print(f"error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}; choose another --port "
              "(0 picks a free one) or --host", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    print(f"provider endpoint listening on {ep.base_url} ({len(script.turns)} scripted turns)", flush=True)
    try:
        ep.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        ep.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
