"""The Anthropic Messages API (``POST /v1/messages``, ``POST /v1/messages/count_tokens``):
route (the routes, over the shared turn plumbing), requests (bodies in mol's plain message
form), reply (the message object and its event stream), thinking (signatures of thinking
blocks)."""
