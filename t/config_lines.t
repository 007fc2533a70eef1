#!/usr/bin/perl

# nginx -t catches what only the whole configuration shows, at the line of
# the directive concerned (not the closing "}" of http {}), naming the
# directive or object, the value and the reason: the attempt location of
# omniroute_pass (missing, without proxy_pass, served by omniroute_pass
# itself, not internal), connections and combos that name unknown things,
# models and combos without a route, an empty egress=, client keys of a
# location that are not declared, the 51st error rule, reasons, statuses
# and times out of their range (listing what is valid), an API location
# without a token, sizes out of range.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use OmniTest;

my $t = OmniTest->new;

$t->write_file('key', "sk-1\n");

my $head = <<'EOF';
    omniroute_provider p url=http://127.0.0.1:1/v1;
    omniroute_connection c1 provider=p key_file=%%TESTDIR%%/key;
    omniroute_model alias p/up;
EOF

# nginx -t on head + body; the line of the marker (a text of the line)
sub check {
    my ($body, $marker, $want, $name) = @_;

    $t->config($head . $body);
    my ($rc, $out) = $t->test_config;

    if (!defined $want) {
        is($rc, 0, $name) or diag($out);
        return;
    }

    my @lines = split /\n/, $t->read_file('nginx.conf');
    my ($line) = grep { index($lines[$_ - 1], $marker) >= 0 } 1 .. @lines;

    isnt($rc, 0, "$name: nginx -t fails");
    like($out, qr/\[emerg\] [^\n]*$want[^\n]* in \S+\/nginx\.conf:$line$/m,
         "$name: at line $line (\"$marker\")")
        or diag($out);
}

my $params = 'include %%PARAMS%%;';

check(<<"EOF", 'omniroute_pass;', qr/"omniroute_pass" of location "\/v1\/" names the attempt location "\/_omniroute", which this server does not have: add "location \/_omniroute \{ internal; include omniroute_params; \}"/,
    server {
        listen 127.0.0.1:1;
        location /v1/ {
            omniroute_pass;
        }
    }
EOF
      'no attempt location');

check(<<"EOF", 'omniroute_pass /attempt;', qr/"omniroute_pass" of location "\/v1\/" names the attempt location "\/attempt", which this server does not have/,
    server {
        listen 127.0.0.1:1;
        location /v1/ {
            omniroute_pass /attempt;
        }
        location /_omniroute { internal; $params }
    }
EOF
      'a custom attempt URI without its location');

check(<<"EOF", 'omniroute_pass;', qr/"omniroute_pass" of location "\/v1\/" names the attempt location "\/_omniroute", whose location "\/_omniroute" has no "proxy_pass" \(include omniroute_params in it\)/,
    server {
        listen 127.0.0.1:1;
        location /v1/ {
            omniroute_pass;
        }
        location /_omniroute { internal; return 204; }
    }
EOF
      'an attempt location without proxy_pass');

check(<<"EOF", 'omniroute_pass;', qr/"omniroute_pass" of location "\/" names the attempt location "\/_omniroute", which is served by "omniroute_pass" of location "\/", not by "proxy_pass"/,
    server {
        listen 127.0.0.1:1;
        location / {
            omniroute_pass;
        }
    }
EOF
      'the attempt URI falls into the omniroute_pass location');

check(<<"EOF", 'omniroute_pass;', qr/which this server does not have/,
    server {
        listen 127.0.0.1:1;
        location /v1/ {
            omniroute_pass;
        }
    }
    server {
        listen 127.0.0.1:2;
        location /_omniroute { internal; $params }
    }
EOF
      'the attempt location of another server does not count');

check(<<"EOF", undef, undef, 'a regex attempt location');
    server {
        listen 127.0.0.1:1;
        location /v1/ { omniroute_pass /attempt/x; }
        location ~ ^/attempt/ { internal; $params }
    }
EOF

check(<<"EOF", undef, undef, 'a nested attempt location');
    server {
        listen 127.0.0.1:1;
        location /v1/ { omniroute_pass /inner/attempt; }
        location /inner/ {
            internal;
            location /inner/attempt { $params }
        }
    }
EOF

check(<<"EOF", undef, undef, 'an exact attempt location');
    server {
        listen 127.0.0.1:1;
        location /v1/ { omniroute_pass; }
        location = /_omniroute { internal; $params }
    }
EOF

my $server = <<"EOF";
    server {
        listen 127.0.0.1:1;
        location /v1/ { omniroute_pass; }
        location /_omniroute { internal; $params }
    }
EOF

check(<<"EOF" . $server, 'omniroute_connection c2', qr/connection "c2" names unknown provider "nope" in "provider=nope" of "omniroute_connection"/,
    omniroute_connection c2 provider=nope key_file=%%TESTDIR%%/key;
EOF
      'a connection of an unknown provider');

check(<<"EOF" . $server, 'omniroute_connection c3', qr/connection "c3" needs "key_env=" or "key_file=": provider "p" sends a credential/,
    omniroute_connection c3 provider=p;
EOF
      'a connection without a key');

check(<<"EOF" . $server, 'q/m;', qr/target "q\/m" of "bad" is neither "provider\/model" with a declared provider nor a model alias/,
    omniroute_combo bad p/m
                    q/m;
EOF
      'a combo target naming an unknown provider (at its last line)');

check(<<"EOF" . $server, 'omniroute_error_body_buffer_size', qr/invalid value "512": "omniroute_error_body_buffer_size" must be at least 1k/,
    omniroute_error_body_buffer_size 512;
EOF
      'an error body buffer below 1k');

check(<<"EOF", 'omniroute_api;', qr/"omniroute_api" needs "omniroute_api_token env=NAME\|file=PATH"/,
    server {
        listen 127.0.0.1:1;
        location /v1/ { omniroute_pass; }
        location /_omniroute { internal; $params }
        location /ops/ {
            omniroute_api;
        }
    }
EOF
      'an API location without a token');

check(<<"EOF", 'omniroute_api_max_body_size', qr/invalid value "100": "omniroute_api_max_body_size" must be between 1k and 16m/,
    omniroute_api_max_body_size 100;
    server {
        listen 127.0.0.1:1;
        location /ops/ { omniroute_api; omniroute_api_token off; }
    }
EOF
      'an API body size out of range');

check(<<"EOF" . $server, 'colour=red;', qr/invalid parameter "colour=red" of provider "q": unknown parameter/,
    omniroute_provider q url=http://x/v1
                       colour=red;
EOF
      'an unknown parameter');

check(<<"EOF" . $server, 'omniroute_model "a b"', qr/invalid model name "a b" of "omniroute_model": 1 to 256 printable characters/,
    omniroute_model "a b" p/x;
EOF
      'a model name with a space');

check(<<"EOF", 'omniroute_pass;', qr/"omniroute_pass" of location "\/v1\/" names the attempt location "\/_omniroute", whose location "\/_omniroute" is not "internal" \(clients could reach the providers through it with the gateway's credentials\): add "internal;" to it/,
    server {
        listen 127.0.0.1:1;
        location /v1/ {
            omniroute_pass;
        }
        location /_omniroute { $params }
    }
EOF
      'an attempt location without internal');

check(<<"EOF" . $server, 'omniroute_model lonely', qr/model "lonely" has no route: provider "empty" of its target "empty\/m" has no connection \(declare "omniroute_connection NAME provider=empty \.\.\."\)/,
    omniroute_provider empty url=http://127.0.0.1:1/v1;
    omniroute_model lonely empty/m;
EOF
      'an alias whose provider has no connection');

check(<<"EOF" . $server, 'omniroute_model narrow', qr/model "narrow" has no route: no connection may serve its target \(the "models=" of the 1 connection of provider "q" leave out "other"\)/,
    omniroute_provider q url=http://127.0.0.1:1/v1;
    omniroute_connection q1 provider=q key_file=%%TESTDIR%%/key
                         models=only-this;
    omniroute_model narrow q/other;
EOF
      'a connection models= list that leaves an alias with no route');

check(<<"EOF" . $server, 'omniroute_combo dead', qr/combo "dead" has no route: provider "empty" of its target "empty\/a" has no connection/,
    omniroute_provider empty url=http://127.0.0.1:1/v1;
    omniroute_combo dead empty/a empty/b;
EOF
      'a combo with no route at all');

check(<<"EOF" . $server, undef, undef, 'a combo with one target without a route passes');
    omniroute_provider empty url=http://127.0.0.1:1/v1;
    omniroute_combo half p/up empty/b;
EOF

check(<<"EOF" . $server, 'egress=', qr/empty "egress=" of connection "c2": expected the key of the connection's egress path/,
    omniroute_connection c2 provider=p key_file=%%TESTDIR%%/key
                         egress=;
EOF
      'an empty egress=');

my $hash = '0' x 64;

check(<<"EOF" . $server, 'omniroute_client_keys k9;', qr/"omniroute_client_keys" names unknown client key "k9"/,
    omniroute_client_key k1 sha256=$hash;
    server {
        listen 127.0.0.1:3;
        location /v1/ {
            omniroute_pass;
            omniroute_client_keys k9;
        }
        location /_omniroute { internal; $params }
    }
EOF
      'omniroute_client_keys naming an unknown key');

check(<<"EOF" . $server, 'omniroute_client_keys on;', qr/"omniroute_client_keys" is on but no "omniroute_client_key" is declared/,
    server {
        listen 127.0.0.1:3;
        location /v1/ {
            omniroute_pass;
            omniroute_client_keys on;
        }
        location /_omniroute { internal; $params }
    }
EOF
      'omniroute_client_keys on without keys');

check(<<"EOF" . $server, 'reason=slow', qr/unknown reason in "reason=slow": expected rate_limit_exceeded, quota_exhausted, [a-z_, ]*server_error/,
    omniroute_error_rule p status=500 reason=slow;
EOF
      'an unknown reason= lists the reasons');

check(<<"EOF" . $server, 'status=700', qr/invalid parameter "status=700" of "omniroute_error_rule": expected an HTTP status 100\.\.599/,
    omniroute_error_rule p status=700 reason=server_error;
EOF
      'status= out of range');

check(<<"EOF" . $server, 'to=42', qr/invalid parameter "to=42" of "omniroute_restate": expected an HTTP status 100\.\.599/,
    omniroute_restate p id=r1 from=400 to=42 marker=x;
EOF
      'to= out of range');

check(<<"EOF" . $server, 'omniroute_session_affinity', qr/invalid value "soon" of "omniroute_session_affinity": expected a time \(a number with the unit ms, s, m, h or d, e\.g\. "30m"; 0: off\)/,
    omniroute_session_affinity soon;
EOF
      'omniroute_session_affinity says what it expects');

my $rules = join '', map { "    omniroute_error_rule p status=500 match=m$_"
                           . " reason=server_error;\n" } 1 .. 51;

check($rules . $server, 'match=m51 ', qr/provider "p" has more than 50 omniroute_error_rule rules/,
      'the 51st error rule, at its line');

check(<<"EOF" . $server, 'omniroute_redis', qr/"omniroute_redis" requires "omniroute_zone" \(the state it mirrors\)/,
    omniroute_redis 127.0.0.1:6379;
EOF
      'omniroute_redis without a zone');

check($server, undef, undef, 'the usual configuration passes');

$t->done;

done_testing;
