declare module "@tabler/icons-react/dist/esm/icons/*.mjs" {
  import type { Icon } from "@/components/icons";
  const icon: Icon;
  export default icon;
}
