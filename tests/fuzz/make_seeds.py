#!/usr/bin/env python3
# Writes the seed inputs of tests/fuzz/corpus/<harness>/ (small excerpts of tests/data/traces and
# hand-written stream, error-body, tokenizer.json, request and store-edit examples). Regression inputs
# (crashes found and fixed) are added to the corpus by hand; this script never removes files.
#   python3 tests/fuzz/make_seeds.py
import json, os, struct, sys
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
C = os.path.join(root, 'tests/fuzz/corpus')
def w(h, name, data):
    d = os.path.join(C, h); os.makedirs(d, exist_ok=True)
    if isinstance(data, str): data = data.encode('utf-8')
    open(os.path.join(d, name), 'wb').write(data)
T = os.path.join(root, 'tests/data/traces')
# --- trace: small trace excerpts + malformed lines
def lines(rel, n=None):
    ls = [l for l in open(os.path.join(T, rel), encoding='utf-8').read().split('\n') if l.strip()]
    return ls[:n] if n else ls
def clip(line, limit=1500):
    m = json.loads(line)
    if isinstance(m.get('content'), str) and len(m['content']) > limit: m['content'] = m['content'][:limit]
    return json.dumps(m, ensure_ascii=False)
w('trace', 'function-calling-simple.jsonl', '\n'.join(clip(l) for l in lines('swe-agent/demo-function_calling_simple.jsonl')) + '\n')
w('trace', 'mini-swe-agent-head.jsonl', '\n'.join(clip(l) for l in lines('mini-swe-agent/astropy__astropy-14182.jsonl', 8)) + '\n')
w('trace', 'ctf-networking-head.jsonl', '\n'.join(clip(l) for l in lines('swe-agent/ctf-misc-networking_1.jsonl', 6)) + '\n')
w('trace', 'malformed.jsonl', '\n'.join([
  '{"role":"system","content":"You are an agent."}',
  '{"role":"user","content":"fix the bug"}',
  '{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\\"command\\": \\"ls\\"}"}}]}',
  '{"role":"tool","tool_call_id":"c1","content":"a.py\\nb.py"}',
  '{"role":"tool","tool_call_id":"c9","content":"orphan"}',
  '{"role":"robot","content":"x"}', '{"role":"user","content":5}', '["user"]', '{"role":"user","content":',
  '{"role":"assistant","content":"","tool_calls":[{"id":"c"}]}',
  '{"role":"assistant","content":"thinking","reasoning_content":"because"}',
]) + '\n')
# --- chat_stream
def sse(payloads, sep='\n\n'):
    return ''.join('data: ' + p + sep for p in payloads)
chunk = lambda delta, **kw: json.dumps(dict({"id":"c1","object":"chat.completion.chunk","model":"glm","choices":[{"index":0,"delta":delta,"finish_reason":kw.get('finish')}]}, **({'usage':kw['usage']} if 'usage' in kw else {})))
w('chat_stream', 'content.sse', sse([chunk({"role":"assistant","content":"Hel"}), chunk({"content":"lo"}), chunk({}, finish="stop"),
   json.dumps({"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":2,"total_tokens":14,"prompt_tokens_details":{"cached_tokens":8}}}), '[DONE]']))
w('chat_stream', 'tool-call.sse', sse([chunk({"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"bash","arguments":""}}]}),
   chunk({"tool_calls":[{"index":0,"function":{"arguments":"{\"comm"}}]}), chunk({"tool_calls":[{"index":0,"function":{"arguments":"and\": \"ls\"}"}}]}),
   chunk({"tool_calls":[{"index":1,"id":"call_2","function":{"name":"view","arguments":"{}"}}]}), chunk({}, finish="tool_calls"), '[DONE]'], sep='\r\n\r\n'))
# 0xFF cuts the stream into network reads (inside a field name, between the two newlines).
split = sse([chunk({"reasoning_content":"think"}), chunk({"content":"ok"}, finish="stop"), '[DONE]']).encode()
w('chat_stream', 'reasoning-split-reads.sse', split.replace(b'ason', b'as\xffon').replace(b'\n\ndata', b'\n\xff\ndata'))
w('chat_stream', 'error-in-stream.sse', 'event: message\nid: 1\n: comment\n' + sse([chunk({"content":"a"}), json.dumps({"error":{"message":"context length exceeded","type":"invalid_request_error","code":400}})]))
w('chat_stream', 'multiline-data.sse', 'data: {"choices":[{"index":0,\ndata: "delta":{"content":"x"}}]}\n\ndata: [DONE]\n\n')
# --- chat_whole: first byte picks status (index into the harness table: 0=200, 2=400, 10=429, 11=500)
whole = json.dumps({"id":"c2","object":"chat.completion","model":"glm","choices":[{"index":0,"message":{"role":"assistant","content":"done","reasoning_content":"r","tool_calls":[{"id":"call_1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":100,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":64}}})
w('chat_whole', 'completion.json', b'\x00' + whole.encode())
w('chat_whole', 'error-nested-400.json', b'\x02' + json.dumps({"error":{"message":"bad request: messages[3] is invalid","type":"invalid_request_error","param":None,"code":None}}).encode())
w('chat_whole', 'error-flat-429.json', b'\x0a' + json.dumps({"object":"error","message":"rate limited","type":"RateLimitError","code":429}).encode())
w('chat_whole', 'error-no-message-500.json', b'\x0b' + json.dumps({"error":{"detail":[{"loc":["body"],"msg":"x"}]}}).encode())
w('chat_whole', 'html-502.txt', b'\x0c<html><body>Bad gateway</body></html>\n')
w('chat_whole', 'error-200.json', b'\x00' + json.dumps({"error":{"message":"server overloaded","code":"overloaded"}}).encode())
# --- tool_calls: fragments separated by 0xff; first byte: index (low 2 bits), 0x10 = id and name
w('tool_calls', 'one-call.bin', b'\x10{"comm' + b'\xff' + b'\x00and": "ls -la"}')
w('tool_calls', 'interleaved.bin', b'\x10{"path": "/tmp/a' + b'\xff\x11{"x": [1, 2' + b'\xff\x00.py"}' + b'\xff\x01, 3]}' + b'\xff\x12' + b'\xff\x02{}')
w('tool_calls', 'unicode-escapes.bin', '\x10{"text": "caf\u00e9 \\u00e9 \\ud83d\\ude00 \\n\\t"}'.encode())
# --- json_canonical: tool-call arguments and documents
w('json_canonical', 'arguments.json', '{"command": "grep -rn \\"foo\\" src/ | head -20", "timeout": 30}')
w('json_canonical', 'nested.json', json.dumps({"b":[1,2.5,-0.0,1e300,12345678901234567890,None,True,{"z":1,"a":"\u00e9\u4e2d\ud83d\ude00"}],"a":{"":"","\u0000":"\u001f"}}))
w('json_canonical', 'numbers.json', '[0, -0, 1.0, 1e-7, 1E+2, 0.1, 123456789012345678, -9223372036854775808, 18446744073709551615, 3.141592653589793]')
w('json_canonical', 'duplicate-keys.json', '{"a":1,"a":2,"b":{"c":[],"c":{}}}')
w('json_canonical', 'string.json', '"line\\nbreak \\u2028 \\/ slash"')
# --- tokenizer_json
def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~")+1))+list(range(ord("¡"), ord("¬")+1))+list(range(ord("®"), ord("ÿ")+1))
    cs = bs[:]; n = 0
    for b in range(256):
        if b not in bs: bs.append(b); cs.append(256+n); n += 1
    return dict(zip(bs, [chr(c) for c in cs]))
b2u = bytes_to_unicode()
vocab = {b2u[b]: i for i, b in enumerate(range(256))}
merges = []
for a, b in [("h","e"),("he","l"),("hel","l"),("hell","o"),("Ġ","w"),("Ġw","o"),("Ġwo","r"),("Ġwor","l"),("Ġworl","d")]:
    vocab[a+b] = len(vocab); merges.append(a + " " + b)
base = {"version":"1.0","truncation":None,"padding":None,
  "added_tokens":[{"id":len(vocab),"content":"<|endoftext|>","single_word":False,"lstrip":False,"rstrip":False,"normalized":False,"special":True}],
  "normalizer":{"type":"NFC"},
  "pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":False},{"type":"ByteLevel","add_prefix_space":False,"trim_offsets":False,"use_regex":False}]},
  "post_processor":None,"decoder":{"type":"ByteLevel","add_prefix_space":False,"trim_offsets":False,"use_regex":False},
  "model":{"type":"BPE","dropout":None,"unk_token":None,"continuing_subword_prefix":"","end_of_word_suffix":"","fuse_unk":False,"byte_fallback":False,"vocab":vocab,"merges":merges}}
w('tokenizer_json', 'bytelevel-bpe.json', json.dumps(base, ensure_ascii=False))
simple = json.loads(json.dumps(base)); simple["normalizer"] = None; simple["pre_tokenizer"] = {"type":"ByteLevel","add_prefix_space":False,"use_regex":True}
simple["model"]["merges"] = [m.split(" ") for m in merges]  # newer array form
w('tokenizer_json', 'bytelevel-pairs-merges.json', json.dumps(simple, ensure_ascii=False))
seqn = json.loads(json.dumps(base)); seqn["normalizer"] = {"type":"Sequence","normalizers":[{"type":"NFC"},{"type":"Replace","pattern":{"String":"\t"},"content":"    "}]}
seqn["pre_tokenizer"] = {"type":"Sequence","pretokenizers":[{"type":"Digits","individual_digits":True},{"type":"ByteLevel","add_prefix_space":True,"use_regex":True}]}
w('tokenizer_json', 'sequence-normalizer.json', json.dumps(seqn, ensure_ascii=False))
# --- tokenizer_encode: text lines from traces
texts = []
for rel in ['swe-agent/ctf-crypto-BabyEncryption.jsonl', 'mini-swe-agent/django__django-11265.jsonl']:
    for l in lines(rel, 6):
        c = json.loads(l).get('content')
        if isinstance(c, str) and c: texts.append(c[:2000])
for i, t in enumerate(texts[:8]): w('tokenizer_encode', f'trace-text-{i}.txt', t)
w('tokenizer_encode', 'hard.txt', "emoji😀in😀text 👩‍👩‍👧‍👦 中文分词 e\u0301 <|im_start|>user\nhi<|im_end|> ﬁ 12345678901234567890 \u200b\ufeff")
w('tokenizer_encode', 'invalid-utf8.bin', b'a\xffb\xe4\xb8 c\xc0\x80 \xed\xa0\x80')
# --- chat_template: first byte: bit0 reasoning line, bit1 generation prompt, 3 = generic
req = {"model":"glm-5","messages":[{"role":"system","content":"You are a coding agent."},{"role":"user","content":"List the files."},
  {"role":"assistant","content":"","reasoning_content":"I should run ls.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"bash","arguments":"{\"command\": \"ls -la\", \"timeout\": 30}"}}]},
  {"role":"tool","tool_call_id":"call_1","content":"a.py\nb.py"},{"role":"assistant","content":"Two files."},{"role":"user","content":"Thanks"}],
  "tools":[{"type":"function","function":{"name":"bash","description":"Run a command","parameters":{"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"integer"}},"required":["command"]}}}],
  "reasoning_effort":"high","chat_template_kwargs":{"enable_thinking":True,"clear_thinking":False}}
for b, name in [(3,'glm5-full'), (0,'glm5-plain'), (7,'generic')]:
    w('chat_template', name + '.json', bytes([b]) + json.dumps(req, ensure_ascii=False).encode())
req2 = {"messages":[{"role":"developer","content":"d"},{"role":"user","content":[{"type":"text","text":"parts"}]},{"role":"assistant","content":None,"tool_calls":[{"id":"x","type":"function","function":{"name":"f","arguments":"{\"a\": {\"b\": [1, {\"c\": null}]}}"}}]},{"role":"tool","tool_call_id":"x","content":"r"}]}
w('chat_template', 'glm5-nested-arguments.json', bytes([2]) + json.dumps(req2).encode())
# --- store_rows: edits (op, row, value)
def edit_int(op, row, v): return bytes([op, row]) + struct.pack('<q', v)
def edit_bytes(op, row, b): return bytes([op, row, len(b)]) + b
w('store_rows', 'no-edit.bin', b'')
w('store_rows', 'layer-out-of-range.bin', edit_int(3, 2, 7))
w('store_rows', 'kind-and-state.bin', edit_int(2, 1, -1) + edit_int(4, 3, 99))
w('store_rows', 'tool-calls-truncated.bin', edit_bytes(16, 4, b'\x01\x00\x00\x00\x05\x00\x00\x00ab'))
w('store_rows', 'blob-codec.bin', edit_int(21, 0, 5) + edit_int(20, 1, 1 << 20))
w('store_rows', 'blob-data.bin', edit_bytes(22, 0, b'\x28\xb5\x2f\xfd garbage'))
w('store_rows', 'options-json.bin', edit_bytes(24, 0, b'{"agent":{"id":5},"hygiene":[]}'))
w('store_rows', 'content-null.bin', bytes([17, 2, 0xff]) + bytes([18, 2, 0xff]))
# --- agent_config: AgentConfig JSON documents (every section; limits as fractions and as tokens)
full = {"identity":{"id":"ctf-forensics-flash","tenant":"t1","scope":"repo","model_version":"glm-5.3-flash","template_version":"1"},
  "tokenizer":"spm:tests/data/strata-test-spm.model","chat_template":"glm-5.3",
  "budget":{"window":131072,"reserve_output":4096,"reserve_reasoning":2048,"trigger":{"fraction":0.9},"target":{"tokens":60000},"enforce":True},
  "policy":{"name":"strata","keep_turns":2,"keep_tool_results":3,"keep_first_user":True,"exclude_tools":["submit"],"ephemeral_tools":["ls","find"],"max_summary_tokens":512,"last_n":8},
  "hygiene":{"max_segment_tokens":8192,"head_share":0.5,"deduplicate":True,"fold_error_logs":True,"min_repeat_run":3,"min_bytes":256},
  "render":{"model":"glm-5.3-flash","system_layout":"single_message","reasoning_field":"reasoning_content","volatile_role":"user"},
  "keep_originals":True,"message_overhead_tokens":6,
  "endpoint":{"backend":"sglang","base_url":"http://127.0.0.1:8000/v1","api_key_env":"STRATA_API_KEY","deployment_secret_env":"","stream":True,"max_output_tokens":4096,
    "thinking":True,"reasoning_effort":"high","send_cache_salt":True,"deadline_ms":600000,"connect_timeout_ms":5000,"first_byte_timeout_ms":120000,"idle_timeout_ms":60000,"total_timeout_ms":600000,"max_attempts":3},
  "cache":{"block_tokens":16,"bytes_per_token":3.5,"capacity_blocks":65536},
  "recall":{"expose_tool":True,"max_share_of_target":0.25,"protect_turns":3},"store_path":"agents.db"}
w('agent_config', 'full.json', json.dumps(full))
w('agent_config', 'minimal.json', '{"identity":{"id":"x"}}')
w('agent_config', 'estimate-generic.json', json.dumps({"identity":{"id":"demo-function_calling_simple"},"tokenizer":"estimate:3.5","chat_template":"generic",
  "budget":{"window":32000,"trigger":{"tokens":30000},"target":{"fraction":0.5}},"policy":{"name":"last-n","last_n":4},"endpoint":{"thinking":None}}))
w('agent_config', 'wrong-types.json', '{"budget":{"window":-5,"trigger":{"fraction":"high"}},"policy":{"exclude_tools":["a",3]},"hygiene":{"head_share":2}}')
w('agent_config', 'unknown-key.json', '{"budget":{"windw":8000},"tokeniser":"estimate"}')
# --- sim_request: raw HTTP requests to strata-sim (bodies from the traces)
def http(body, path='/v1/chat/completions', extra=''):
    if isinstance(body, str): body = body.encode('utf-8')
    return (f'POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{extra}Content-Length: {len(body)}\r\n\r\n').encode() + body
msgs = [json.loads(clip(l, 600)) for l in lines('swe-agent/demo-function_calling_simple.jsonl')]
for m in msgs:
    for c in m.get('tool_calls') or []: c.pop('index', None)
w('sim_request', 'trace-stream.http', http(json.dumps({"model":"glm-5.3-flash","messages":msgs[:3],"stream":True,"stream_options":{"include_usage":True},"max_tokens":64,"cache_salt":"s1"})))
w('sim_request', 'trace-whole.http', http(json.dumps({"model":"glm-5.3-flash","messages":msgs,"max_tokens":32,"temperature":0.2})))
w('sim_request', 'tools-reasoning.http', http(json.dumps(dict(req, stream=True, max_completion_tokens=16)), extra='X-Request-Id: r1\r\nX-Strata-Sim-Chunk: 3\r\n'))
w('sim_request', 'wrong-types.http', http('{"model":5,"stream":"yes","messages":[{"role":5,"content":"x"}]}'))
w('sim_request', 'keep-alive-two.http', http('{"messages":[{"role":"user","content":"a"}]}') + http('{"messages":[{"role":"user","content":"b"}],"stream":true}'))
w('sim_request', 'chunked-and-negative-length.http', b'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n{}' +
  b'POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n')
w('sim_request', 'get-metrics-models.http', b'GET /metrics HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n')
w('sim_request', 'reply-header.http', http('{"messages":[{"role":"user","content":"hi"}]}', extra='X-Strata-Sim-Reply: {"role":"assistant","content":"ok","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}\r\n'))
# --- sidecar_request: Chat Completions bodies an OpenAI client sends the sidecar's proxy (the
# conversation of tests/data/sidecar/read_file_agent.jsonl, growing), refusals, and stored client views
convo = [json.loads(l) for l in open(os.path.join(root, 'tests/data/sidecar/read_file_agent.jsonl'), encoding='utf-8') if l.strip()]
tools = [{"type":"function","function":{"name":"read_file","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}}]
w('sidecar_request', 'first-turn.json', json.dumps({"model":"glm-5.3-flash","messages":convo[:2],"tools":tools}))
w('sidecar_request', 'tool-results.json', json.dumps({"model":"glm-5.3-flash","messages":convo[:6],"tools":tools,"stream":True,"stream_options":{"include_usage":True}}))
echo = dict(convo[2]); echo.update({"content":None,"refusal":None})
w('sidecar_request', 'echoed-reply.json', json.dumps({"messages":convo[:2] + [echo] + convo[3:4]}))
w('sidecar_request', 'parts-and-developer.json', json.dumps({"messages":[{"role":"developer","content":"be brief"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"assistant","content":"ok","reasoning_content":"r"},{"role":"user","content":"more"}]}))
w('sidecar_request', 'refusals.json', json.dumps({"messages":[{"role":"user","content":"x"},{"role":"system","content":"late"},{"role":"tool","content":"no id"},{"role":"user","content":[{"type":"image_url"}]}]}))
w('sidecar_request', 'unanswered-call.json', json.dumps({"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"user","content":"y"}]}))
w('sidecar_request', 'client-view.json', json.dumps({"version":1,"entries":[["0123456789abcdef0123456789abcdef","user","seg-1"],["fedcba9876543210fedcba9876543210","assistant","seg-2"]]}))
# --- sidecar_proxy: whole Chat Completions bodies for the proxy's field checks and the turn after
# them (the sidecar conversation and a trace conversation with handled, forwarded and agent-owned
# fields; wrong types; nesting at the limit)
def ends_answerable(ms):  # cut after the last user or tool message (the proxy answers those)
    last = max(i for i, m in enumerate(ms) if m['role'] in ('user', 'tool'))
    return ms[:last + 1]
w('sidecar_proxy', 'first-turn.json', json.dumps({"model":"glm-5.3-flash","messages":convo[:2],"tools":tools,"temperature":0.2,"max_tokens":256}))
w('sidecar_proxy', 'stream-agent-owned.json', json.dumps({"model":"glm-5.3-flash","messages":ends_answerable(convo[:6]),"tools":tools,"stream":True,
  "stream_options":{"include_usage":True},"cache_salt":"other-tenant","request_id":"r-1","rid":"r-1","seed":7,"stop":["\n\n"],
  "response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object","properties":{"x":{"type":"array","items":{"type":"integer"}}}}}}}))
trace_msgs = [json.loads(clip(l, 600)) for l in lines('swe-agent/demo-function_calling_simple.jsonl')]
trace_tools = sorted({c['function']['name'] for m in trace_msgs for c in m.get('tool_calls') or []})
w('sidecar_proxy', 'trace-conversation.json', json.dumps({"messages":ends_answerable(trace_msgs),"n":1,"user":"u1",
  "tools":[{"type":"function","function":{"name":n,"parameters":{"type":"object"}}} for n in trace_tools],
  "max_completion_tokens":64,"max_tokens":32,"tool_choice":{"type":"function","function":{"name":trace_tools[0]}},"chat_template_kwargs":{"enable_thinking":False}}))
w('sidecar_proxy', 'developer-parts-nulls.json', json.dumps({"messages":[{"role":"developer","content":"be brief"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
  {"role":"assistant","content":None,"refusal":None,"reasoning_content":"r","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":None}},{"id":"b","function":{"name":"g","arguments":"{\"k\": [1, 2]}"}}]},
  {"role":"tool","tool_call_id":"b","content":None},{"role":"tool","tool_call_id":"a","content":[{"type":"text","text":"done"}]}],
  "tools":None,"stream":None,"stream_options":None,"model":""}))
for name, field, value in [('n-2', 'n', 2), ('model-number', 'model', 5), ('tools-object', 'tools', {}), ('stream-string', 'stream', 'yes'),
                           ('stream-options-usage-number', 'stream_options', {"include_usage":1})]:
    w('sidecar_proxy', 'wrong-' + name + '.json', json.dumps({"messages":convo[:2], field:value}))
w('sidecar_proxy', 'not-an-object.json', json.dumps([{"messages":convo[:2]}]))
w('sidecar_proxy', 'nested-511-levels.json', '{"messages":' + json.dumps(convo[:2]) + ',"logit_bias":' + '[' * 511 + '1' + ']' * 511 + '}')
w('sidecar_proxy', 'nested-512-levels.json', '{"messages":' + json.dumps(convo[:2]) + ',"logit_bias":' + '[' * 512 + '1' + ']' * 512 + '}')
# --- sidecar_config: strata-sidecar configuration documents (every key; tenants, limits, TLS, the
# tokenizer allow-list; wrong types; integers at and beyond their ranges; nesting at the limit and,
# as a regression input, 100k levels deep under a typed key, which used to overflow the stack)
hash_a, hash_b = 'a' * 64, 'b' * 64
w('sidecar_config', 'full.json', json.dumps({"grpc_listen":"127.0.0.1:0","http_listen":"127.0.0.1:0","store":"agents.db","store_sync":"normal",
  "upstream":"http://127.0.0.1:8000/v1","backend":"vllm","upstream_api_key_env":"UPSTREAM_KEY","tokenizer":"glm-5.3",
  "tokenizers":{"glm-5.3":"hf:/srv/glm/tokenizer.json","rough":"estimate:3.5","spm":"spm:/srv/m.model"},"template":"glm5","budget":200000,
  "allow_unauthenticated":False,"allow_core_dumps":False,"drain_timeout_ms":10000,"max_threads":64,"max_open_agents":1024,
  "default_limits":{"max_agents":1000,"max_concurrent_completions":16,"max_request_bytes":4194304},
  "tenants":[{"name":"team-a","token_sha256":[hash_a],"limits":{"max_agents":10}},{"name":"team-b","token_sha256":[hash_b]}],
  "metrics_token_sha256":[hash_a],"metrics":{"kv_capacity_bytes":1},"pools":{}}))
w('sidecar_config', 'minimal.json', '{}')
w('sidecar_config', 'file-default-tokenizer.json', json.dumps({"tokenizer":"hf:/srv/t.json","tokenizers":{"default":"hf:/srv/other.json"}}))
w('sidecar_config', 'tokenizer-names.json', json.dumps({"tokenizers":{"a b":"estimate","":"hf:/x","ok":""}}))
w('sidecar_config', 'wrong-types.json', json.dumps({"budget":"big","tokenizers":{"a":1},"tenants":{},"tls":{"cert_file":3},"allow_core_dumps":"yes"}))
w('sidecar_config', 'ranges.json', json.dumps({"budget":1073741824,"drain_timeout_ms":3600000,"max_threads":4096,"max_open_agents":10000000,
  "default_limits":{"max_agents":10000000,"max_concurrent_completions":100000,"max_request_bytes":1073741824}}))
w('sidecar_config', 'out-of-range.json', '{"budget":9223372036854775807,"max_threads":18446744073709551615,"default_limits":{"max_request_bytes":0}}')
w('sidecar_config', 'nested-512-levels.json', '{"metrics":{"x":' + '[' * 511 + '1' + ']' * 511 + '}}')
w('sidecar_config', 'nested-513-levels.json', '{"metrics":{"x":' + '[' * 512 + '1' + ']' * 512 + '}}')
w('sidecar_config', 'regression-budget-nested-100k.json', '{"budget":' + '[' * 100000 + ']' * 100000 + '}')
# --- sidecar_stream_error: a client body (made a streamed request) and, after "\n#upstream#\n",
# how its turn fails upstream: the first byte picks raw status / HTTP error body / unparsable
# answer / the key quoted (fuzz_sidecar_stream_error.cc); the crash inputs are regression-* files
SEP = b'\n#upstream#\n'
def stream_body(ms, **extra):
    return json.dumps(dict({"model":"glm-5.3-flash","messages":ms,"stream":True}, **extra), ensure_ascii=False).encode()
hi = [{"role":"user","content":"hi"}]
w('sidecar_stream_error', 'success.json', stream_body(hi))
w('sidecar_stream_error', 'success-with-usage.json', stream_body(hi, stream_options={"include_usage":True}))
w('sidecar_stream_error', 'conversation-503.txt', stream_body(ends_answerable(convo[:6]), tools=tools) + SEP + b'\x00' + b'server error: overloaded')
w('sidecar_stream_error', 'raw-invalid-status-message.txt', stream_body(hi) + SEP + b'\x00' + b'upstream said \xc3')
w('sidecar_stream_error', 'key-quoted-in-401.txt', stream_body(hi) + SEP + b'\x05' + b'{"error":{"message":"Incorrect API key provided: Bearer sk-fuzz-upstream-key-7f3a","type":"invalid_request_error"}}')
w('sidecar_stream_error', 'key-quoted-authorization-line.txt', stream_body(hi) + SEP + b'\x05' + b'you sent\nAuthorization: Bearer sk-fuzz-upstream-key-7f3a\n')
w('sidecar_stream_error', 'key-quoted-raw.txt', stream_body(hi) + SEP + b'\x03' + 'é'.encode())
w('sidecar_stream_error', 'not-an-object.txt', b'["x\xc3"]')
w('sidecar_stream_error', 'tool-arguments-then-upstream-error.txt', stream_body(hi) + SEP + b'\x01' + b'{"error":{"message":"' + ('é' * 200).encode() + b'"}}')
