import yaml from "js-yaml";
import { apiUrl } from "./api-client";
import type { StudySpec } from "./types";

/** The study spec as YAML, for the CLI (`windtunnel submit study.yaml`). */
export function specToYaml(spec: StudySpec): string {
  return yaml.dump(spec, { indent: 2, lineWidth: 100, noRefs: true, sortKeys: false });
}

/** A curl command that creates the same study over the REST API with a token. */
export function specToCurl(spec: StudySpec): string {
  const body = JSON.stringify(spec, null, 2).replace(/'/g, "'\\''");
  return [
    `curl -X POST '${apiUrl("/api/v1/studies/")}' \\`,
    `  -H "Authorization: Token $WINDTUNNEL_TOKEN" \\`,
    `  -H 'Content-Type: application/json' \\`,
    `  --data '${body}'`,
  ].join("\n");
}
