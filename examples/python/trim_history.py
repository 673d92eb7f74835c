"""Trims a chat history (an OpenAI messages list in JSON, as LangChain's convert_to_openai_messages
or any OpenAI client produces) into a token budget, the way LangChain's trim_messages is used:

    python3 examples/python/trim_history.py history.json --max-tokens 4000 > trimmed.json

System messages stay first, every tool result stays with the call it answers, and what was
dropped or summarized is reported on standard error. Use --tokenizer hf:PATH/tokenizer.json for
the model's exact counts (default: the bytes-per-token estimate).
"""

from __future__ import annotations

import argparse
import json
import sys

import strata


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("history", help="JSON file holding a list of OpenAI messages ('-': stdin)")
    parser.add_argument("--max-tokens", type=int, required=True, help="input tokens at most")
    parser.add_argument("--policy", default="strata", help="strata, sliding, last-n or none")
    parser.add_argument("--tokenizer", default="estimate", help="tokenizer spec")
    parser.add_argument("--chat-template", default="glm5", help="glm5, generic or ''")
    args = parser.parse_args(argv)

    text = sys.stdin.read() if args.history == "-" else open(args.history).read()
    try:
        result = strata.trim_messages(text, args.max_tokens, policy=args.policy,
                                      tokenizer=args.tokenizer, chat_template=args.chat_template)
    except strata.Error as e:
        print(f"trim_history: {e}", file=sys.stderr)
        return 1
    json.dump(result.messages, sys.stdout, indent=1, ensure_ascii=False)
    print()
    if result.report is None:
        print(f"kept all {len(result.messages)} messages ({result.input_tokens} tokens)",
              file=sys.stderr)
    else:
        r = result.report
        print(f"{r.tokens_before} -> {r.tokens_after} tokens ({r.reason}): {r.summarized} "
              f"summarized, {r.masked} masked, {r.evicted} evicted; "
              f"{len(result.messages)} messages kept", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
