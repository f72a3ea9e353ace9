import React, { useState } from "react";

interface TipCalculatorProps {
  /** Bill amount shown at first, in the currency below. */
  initialBill?: number;
  /** Tip choices in percent. */
  tips?: number[];
  /** ISO currency code used for formatting. */
  currency?: string;
}

export default function TipCalculator({
  initialBill = 48.5,
  tips = [10, 15, 20],
  currency = "EUR",
}: TipCalculatorProps) {
  const [bill, setBill] = useState(initialBill);
  const [tip, setTip] = useState(tips[1] ?? tips[0]);
  const format = (value: number) =>
    new Intl.NumberFormat(undefined, { style: "currency", currency }).format(value);
  const total = bill * (1 + tip / 100);

  return (
    <section aria-labelledby="tip-title" style={{ fontFamily: "system-ui", maxWidth: 320 }}>
      <h2 id="tip-title">Tip calculator</h2>
      <label htmlFor="bill">Bill amount</label>
      <input
        id="bill"
        type="number"
        min={0}
        step="0.01"
        value={bill}
        onChange={(event) => setBill(Number(event.target.value) || 0)}
      />
      <fieldset>
        <legend>Tip</legend>
        {tips.map((choice) => (
          <label key={choice} style={{ marginRight: 12 }}>
            <input
              type="radio"
              name="tip"
              checked={tip === choice}
              onChange={() => setTip(choice)}
            />
            {choice}%
          </label>
        ))}
      </fieldset>
      <p aria-live="polite">
        Total: <strong>{format(total)}</strong>
      </p>
    </section>
  );
}
