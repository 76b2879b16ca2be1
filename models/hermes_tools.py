"""The Hermes tool-calling format as a ChatML chat template, the fallback for templates ignoring ``tools=``.

``ChatRenderer`` renders an env's tools with the tokenizer's own chat template when that template renders
them (Qwen2.5's does). The tiny models' template and SmolLM2's ignore ``tools=``; for them the tools would
silently vanish from the prompt, so the renderer uses this template instead, for the tools and the tool
messages alike. It writes what Qwen2.5-Instruct's template writes (the Hermes format that vLLM's ``hermes``
tool parser reads), with the renderer's system prompt in place of Qwen's default one:

- the system message, then ``# Tools`` and every tool's JSON schema inside ``<tools></tools>``, and the
  instruction to call them as ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``;
- an assistant's calls as ``<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>`` blocks
  (``envs.tool_calls.format_tool_call``);
- consecutive ``tool`` messages as one user turn of ``<tool_response>\\n...\\n</tool_response>`` blocks.
"""

from __future__ import annotations

TOOLS_HEADER = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
TOOLS_FOOTER = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": '
    "<args-json-object>}\n</tool_call>"
)


def _literal(text: str) -> str:
    """``text`` as a Jinja string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"


HERMES_TOOLS_TEMPLATE = (
    "{%- if messages and messages[0]['role'] == 'system' -%}"
    "{%- set system = messages[0]['content'] -%}{%- set turns = messages[1:] -%}"
    "{%- else -%}{%- set system = none -%}{%- set turns = messages -%}{%- endif -%}"
    "{%- if tools -%}"
    "{{- '<|im_start|>system\\n' -}}"
    "{%- if system is not none -%}{{- system + '\\n\\n' -}}{%- endif -%}"
    "{{- " + _literal(TOOLS_HEADER) + " -}}"
    "{%- for tool in tools -%}{{- '\\n' + (tool | tojson) -}}{%- endfor -%}"
    "{{- " + _literal(TOOLS_FOOTER) + " + '<|im_end|>\\n' -}}"
    "{%- elif system is not none -%}"
    "{{- '<|im_start|>system\\n' + system + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- for message in turns -%}"
    "{%- if message['role'] == 'tool' -%}"
    "{%- if loop.first or turns[loop.index0 - 1]['role'] != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}"
    "{{- '\\n<tool_response>\\n' + message['content'] + '\\n</tool_response>' -}}"
    "{%- if loop.last or turns[loop.index0 + 1]['role'] != 'tool' -%}{{- '<|im_end|>\\n' -}}{%- endif -%}"
    "{%- elif message['role'] == 'assistant' and message.get('tool_calls') -%}"
    "{{- '<|im_start|>assistant' -}}"
    "{%- if message.get('content') -%}{{- '\\n' + message['content'] -}}{%- endif -%}"
    "{%- for call in message['tool_calls'] -%}"
    "{%- set call = call['function'] if 'function' in call else call -%}"
    "{{- '\\n<tool_call>\\n{\"name\": ' + (call['name'] | tojson) + ', \"arguments\": ' -}}"
    "{{- (call['arguments'] | tojson) + '}\\n</tool_call>' -}}"
    "{%- endfor -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)
