"""The API shapes the server speaks: Chat Completions, Responses and stored responses."""
