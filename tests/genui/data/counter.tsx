import { useState } from "react";
import { Button, Card } from "$ui4a/ui";
import { sendMessage } from "$ui4a/chat";

interface CounterProps {
  label?: string;
}

export default function Counter({ label = "Tasks done" }: CounterProps) {
  const [count, setCount] = useState(0);
  return (
    <Card>
      <h2>{label}</h2>
      <p aria-live="polite">{count} completed</p>
      <Button variant="primary" onClick={() => setCount((n) => n + 1)}>Complete one</Button>
      <Button onClick={() => sendMessage(`I completed ${count} tasks`)}>Report</Button>
    </Card>
  );
}
