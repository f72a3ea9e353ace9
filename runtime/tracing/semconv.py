"""The attribute and span names mol's spans use, from the pinned
``opentelemetry-semantic-conventions`` release (the ``otel`` extra): the only module that
imports it. Nothing here is typed by hand but what the package defines in prose only (the
values of ``gen_ai.tool.type``) and mol's own ``mol.*`` names.

The GenAI names live in the package's incubating modules (0.66b2 marks them as moved to the
GenAI conventions' own repository; the names are unchanged there).
"""

from __future__ import annotations

from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv._incubating.attributes import mcp_attributes as mcp
from opentelemetry.semconv._incubating.attributes import session_attributes as session
from opentelemetry.semconv.attributes import (
    error_attributes,
    http_attributes,
    network_attributes,
    server_attributes,
    url_attributes,
)

Operation = gen_ai.GenAiOperationNameValues

OPERATION = gen_ai.GEN_AI_OPERATION_NAME
INVOKE_AGENT = Operation.INVOKE_AGENT.value
CHAT = Operation.CHAT.value
EXECUTE_TOOL = Operation.EXECUTE_TOOL.value

AGENT_NAME = gen_ai.GEN_AI_AGENT_NAME
AGENT_VERSION = gen_ai.GEN_AI_AGENT_VERSION
CONVERSATION_ID = gen_ai.GEN_AI_CONVERSATION_ID
PROVIDER_NAME = gen_ai.GEN_AI_PROVIDER_NAME
REQUEST_MODEL = gen_ai.GEN_AI_REQUEST_MODEL
REQUEST_MAX_TOKENS = gen_ai.GEN_AI_REQUEST_MAX_TOKENS
REQUEST_TEMPERATURE = gen_ai.GEN_AI_REQUEST_TEMPERATURE
REQUEST_TOP_P = gen_ai.GEN_AI_REQUEST_TOP_P
REQUEST_STOP_SEQUENCES = gen_ai.GEN_AI_REQUEST_STOP_SEQUENCES
REQUEST_STREAM = gen_ai.GEN_AI_REQUEST_STREAM
RESPONSE_FINISH_REASONS = gen_ai.GEN_AI_RESPONSE_FINISH_REASONS
RESPONSE_MODEL = gen_ai.GEN_AI_RESPONSE_MODEL
INPUT_TOKENS = gen_ai.GEN_AI_USAGE_INPUT_TOKENS
OUTPUT_TOKENS = gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS
CACHE_READ_TOKENS = gen_ai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS
INPUT_MESSAGES = gen_ai.GEN_AI_INPUT_MESSAGES
OUTPUT_MESSAGES = gen_ai.GEN_AI_OUTPUT_MESSAGES
TOOL_DEFINITIONS = gen_ai.GEN_AI_TOOL_DEFINITIONS
TOOL_NAME = gen_ai.GEN_AI_TOOL_NAME
TOOL_CALL_ID = gen_ai.GEN_AI_TOOL_CALL_ID
TOOL_TYPE = gen_ai.GEN_AI_TOOL_TYPE
TOOL_DESCRIPTION = gen_ai.GEN_AI_TOOL_DESCRIPTION
TOOL_CALL_ARGUMENTS = gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS
TOOL_CALL_RESULT = gen_ai.GEN_AI_TOOL_CALL_RESULT

EXTENSION = "extension"
"""``gen_ai.tool.type`` of a tool run on the agent's side (the conventions name the values
in prose only: ``function`` runs on the client's side, ``extension`` on the agent's)."""

MCP_METHOD = mcp.MCP_METHOD_NAME
MCP_TOOLS_CALL = mcp.McpMethodNameValues.TOOLS_CALL.value
MCP_PROTOCOL_VERSION = mcp.MCP_PROTOCOL_VERSION
SESSION_ID = session.SESSION_ID

ERROR_TYPE = error_attributes.ERROR_TYPE
HTTP_METHOD = http_attributes.HTTP_REQUEST_METHOD
HTTP_ROUTE = http_attributes.HTTP_ROUTE
HTTP_STATUS = http_attributes.HTTP_RESPONSE_STATUS_CODE
URL_PATH = url_attributes.URL_PATH
SERVER_ADDRESS = server_attributes.SERVER_ADDRESS
SERVER_PORT = server_attributes.SERVER_PORT
NETWORK_TRANSPORT = network_attributes.NETWORK_TRANSPORT
PIPE = network_attributes.NetworkTransportValues.PIPE.value
TCP = network_attributes.NetworkTransportValues.TCP.value
