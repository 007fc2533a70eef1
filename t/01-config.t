#!/usr/bin/perl

# R-CONF-1..5: nginx -t accepts a good configuration and rejects bad values
# with a message naming the directive or object, the value and the reason.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use OmniTest;

my $t = OmniTest->new;

$t->write_file('key', "sk-1\n");
$t->write_file('empty-key', "\n");

my $server = <<'EOF';
    server {
        listen 127.0.0.1:%%PORT_gw%%;
        location /v1/ { omniroute_pass; }
        location /_omniroute { internal; include %%PARAMS%%; }
    }
EOF

my $good = <<'EOF';
    omniroute_zone zone=omniroute:1m;
    omniroute_provider p url=https://api.example.com/v1 kind=oauth
                       auth=header:api-key header=anthropic-version:1;
    omniroute_connection c1 provider=p key_file=%%TESTDIR%%/key
                         priority=2 weight=3;
    omniroute_model alias p/up;
    omniroute_combo combo strategy=priority alias p/other;
EOF

sub check {
    my ($http, $want, $name) = @_;
    $t->config($http . $server);
    my ($rc, $out) = $t->test_config;
    if (!defined $want) {
        is($rc, 0, $name) or diag($out);
        return;
    }
    isnt($rc, 0, "$name: nginx -t fails");
    like($out, $want, "$name: the message says why") or diag($out);
}

check($good, undef, 'R-CONF-1 a good configuration passes nginx -t');

# directive order does not matter: connections and combos before providers
check(<<'EOF', undef, 'directives may come in any order');
    omniroute_combo combo alias p/other;
    omniroute_model alias p/up;
    omniroute_connection c1 provider=p key_file=%%TESTDIR%%/key;
    omniroute_provider p url=http://127.0.0.1:1/v1;
EOF

my @bad = (
    [ 'omniroute_zone omniroute:1m;',
      qr/invalid parameter "omniroute:1m", expected "zone=name:size"/,
      'zone without zone=' ],
    [ 'omniroute_zone zone=omniroute:abc;',
      qr/invalid zone size "zone=omniroute:abc"/, 'zone with a bad size' ],
    [ 'omniroute_zone zone=omniroute:1k;',
      qr/zone "zone=omniroute:1k" is too small/, 'zone too small' ],
    [ "omniroute_zone zone=a:1m;\nomniroute_zone zone=b:1m;",
      qr/"omniroute_zone" directive is duplicate/, 'second zone' ],
    [ 'omniroute_provider p kind=apikey;',
      qr/provider "p" has no "url=" parameter/, 'provider without url' ],
    [ 'omniroute_provider p url=ftp://x/v1;',
      qr/invalid url "ftp:\/\/x\/v1" of provider "p": expected http/,
      'provider url with a bad scheme' ],
    [ 'omniroute_provider p url=http://x:99999/v1;',
      qr/invalid url "http:\/\/x:99999\/v1" of provider "p": invalid port/,
      'provider url with a bad port' ],
    [ 'omniroute_provider p url=http://x/v1?a=b;',
      qr/query strings and fragments are not allowed/,
      'provider url with a query' ],
    [ 'omniroute_provider p url=http://x/v1 kind=cloud;',
      qr/invalid kind "cloud" of provider "p": expected oauth, apikey or local/,
      'provider kind' ],
    [ 'omniroute_provider p url=http://x/v1 auth=basic;',
      qr/invalid auth "basic" of provider "p": expected bearer, x-api-key, header:NAME or none/,
      'provider auth style' ],
    [ 'omniroute_provider p url=http://x/v1 auth=header:bad:name;',
      qr/invalid auth header name "bad:name" of provider "p"/,
      'auth header name' ],
    [ 'omniroute_provider p url=http://x/v1 header=novalue;',
      qr/invalid header "novalue" of provider "p": expected "header=Name:value"/,
      'extra header without a colon' ],
    [ 'omniroute_provider p url=http://x/v1 colour=red;',
      qr/invalid parameter "colour=red" of provider "p"/,
      'unknown provider parameter' ],
    [ "omniroute_provider p url=http://x/v1;\nomniroute_provider p url=http://y/v1;",
      qr/duplicate provider "p"/, 'duplicate provider' ],
    [ 'omniroute_provider "a b" url=http://x/v1;',
      qr/invalid provider name "a b"/, 'provider name with a space' ],
    [ "omniroute_provider p url=http://x/v1;\n"
      . 'omniroute_connection c provider=q key_file=%%TESTDIR%%/key;',
      qr/connection "c" names unknown provider "q"/,
      'connection of an unknown provider' ],
    [ "omniroute_provider p url=http://x/v1;\n"
      . 'omniroute_connection c key_file=%%TESTDIR%%/key;',
      qr/connection "c" has no "provider=" parameter/,
      'connection without provider' ],
    [ "omniroute_provider p url=http://x/v1;\n"
      . 'omniroute_connection c provider=p key_env=OMNI_SURELY_UNSET_VAR;',
      qr/connection "c": environment variable "OMNI_SURELY_UNSET_VAR" is not set or empty/,
      'credential from an unset environment variable' ],
    [ "omniroute_provider p url=http://x/v1;\n"
      . 'omniroute_connection c provider=p key_file=%%TESTDIR%%/nope;',
      qr/connection "c": cannot use key file/, 'missing key file' ],
    [ "omniroute_provider p url=http://x/v1;\n"
      . 'omniroute_connection c provider=p key_file=%%TESTDIR%%/empty-key;',
      qr/key file ".*empty-key" is empty/, 'empty key file' ],
    [ "omniroute_provider p url=http://x/v1;\n"
      . 'omniroute_connection c provider=p;',
      qr/connection "c" needs "key_env=" or "key_file=": provider "p" sends a credential/,
      'connection without a credential' ],
    [ "omniroute_provider p url=http://x/v1;\n"
      . 'omniroute_connection c provider=p key_file=%%TESTDIR%%/key priority=-1;',
      qr/invalid priority "-1" of connection "c": expected 0..1000000/,
      'negative priority' ],
    [ "omniroute_provider p url=http://x/v1;\n"
      . 'omniroute_connection c provider=p key_file=%%TESTDIR%%/key weight=0;',
      qr/invalid weight "0" of connection "c": expected 1..1000/,
      'zero weight' ],
    [ "omniroute_provider p url=http://x/v1;\n"
      . "omniroute_connection c provider=p key_file=%%TESTDIR%%/key;\n"
      . 'omniroute_connection c provider=p key_file=%%TESTDIR%%/key;',
      qr/duplicate connection "c"/, 'duplicate connection' ],
    [ "omniroute_provider p url=http://x/v1;\n"
      . 'omniroute_model m q/up;',
      qr/target "q\/up" of "m" is neither "provider\/model" with a declared provider nor a model alias/,
      'model of an unknown provider' ],
    [ "omniroute_provider p url=http://x/v1;\n"
      . 'omniroute_combo c strategy=fastest p/a;',
      qr/unknown strategy "fastest" of combo "c": expected priority, weighted/, 'unknown strategy' ],
    [ "omniroute_provider p url=http://x/v1;\n"
      . 'omniroute_combo c strategy=priority;',
      qr/combo "c" has no targets/, 'combo without targets' ],
    [ "omniroute_provider p url=http://x/v1;\n"
      . "omniroute_model m p/a;\nomniroute_model m p/b;",
      qr/duplicate model or combo "m"/, 'duplicate model' ],
    [ "omniroute_provider p url=http://x/v1;\n"
      . 'omniroute_model m p/;',
      qr/target "p\/" of "m" has an empty model name/, 'empty upstream model' ],
    [ 'omniroute_max_attempts 0;',
      qr/invalid value "0" of "omniroute_max_attempts": must be between 1 and 100/,
      'max attempts out of range' ],
    [ 'omniroute_error_body_buffer_size 100;',
      qr/"omniroute_error_body_buffer_size" must be at least 1k/,
      'error body buffer too small' ],
);

for my $case (@bad) {
    my ($http, $re, $name) = @$case;
    check("    $http\n", $re, "R-CONF-5 $name");
}

$t->config("    omniroute_zone zone=o:1m;\n" . <<'EOF');
    server {
        listen 127.0.0.1:%%PORT_gw%%;
        location /v1/ { omniroute_pass _omniroute; }
    }
EOF
my ($rc, $out) = $t->test_config;
like($out, qr/invalid attempt location "_omniroute"/,
     'R-CONF-5 omniroute_pass needs a URI');

$t->done;
done_testing;
