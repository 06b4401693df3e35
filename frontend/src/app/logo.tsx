import { Group, Text } from "@mantine/core";

export function Logo({ size = 28 }: { size?: number }) {
  return (
    <Group gap={8} wrap="nowrap">
      <svg width={size} height={size} viewBox="0 0 32 32" aria-hidden>
        <rect width="32" height="32" rx="6" fill="#1c5d99" />
        <path d="M5 19c5-9 14-11 22-7-7-2-13 0-17 5z" fill="#fff" />
        <path d="M6 23h20M9 27h14" stroke="#9cc3e6" strokeWidth="2" strokeLinecap="round" />
      </svg>
      <Text fw={700} size="lg" style={{ letterSpacing: "-0.01em" }}>
        Windtunnel
      </Text>
    </Group>
  );
}
