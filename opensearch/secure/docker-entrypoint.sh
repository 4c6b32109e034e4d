#!/bin/bash
# Entrypoint of the secure test image: fills the users' bcrypt hashes into the security
# configuration, then starts OpenSearch through the main image's entrypoint.
#
# internal_users.yml names each user's hash as @HASH:<user>@; its password comes from the
# environment variable OPENSEARCH_PASSWORD_<user> (e.g. OPENSEARCH_PASSWORD_admin), hashed with the
# security plugin's own tool. Done once: the security index is created from these files at the
# first start and read from the index afterwards. The variables are removed before OpenSearch starts.
set -euo pipefail
users_file=/usr/share/opensearch/config/opensearch-security/internal_users.yml
hasher=/usr/share/opensearch/plugins/opensearch-security/tools/hash.sh
while read -r user; do
    variable=OPENSEARCH_PASSWORD_${user}
    if [[ -z ${!variable:-} ]]; then
        echo "docker-entrypoint: set $variable (the password of user $user)" >&2
        exit 1
    fi
    hash=$(bash "$hasher" -env "$variable" | tail -n 1)
    [[ $hash == \$2* ]] || { echo "docker-entrypoint: hashing $user's password failed" >&2; exit 1; }
    sed -i "s|@HASH:${user}@|${hash}|" "$users_file"
done < <(grep -o '@HASH:[A-Za-z0-9_]*@' "$users_file" | sed 's/@HASH:\(.*\)@/\1/' | sort -u)
while IFS= read -r variable; do unset "$variable"; done < <(compgen -e | grep '^OPENSEARCH_PASSWORD_' || true)
exec /usr/local/bin/docker-entrypoint.sh "$@"
