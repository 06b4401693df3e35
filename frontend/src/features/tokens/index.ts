export { ApiTokens } from "./components/api-tokens";
